// Collects one output stream of a running program while bounding memory: the first `capChars`
// characters are kept, the rest is only counted. Exec streams ignore back-pressure, so a program
// that prints 10 MB must not make the gateway hold 10 MB.
import { StringDecoder } from 'node:string_decoder';

export class CappedOutput {
  private readonly decoder = new StringDecoder('utf8');
  private kept = '';
  private bytes = 0;
  private cut = false;

  constructor(private readonly capChars: number) {}

  /**
   * Adds raw bytes; returns the newly kept text (for streaming), '' when nothing new. Past the
   * cap, bytes are only counted: not even decoded, so 1 GB of output costs no garbage either.
   */
  push(chunk: Buffer): string {
    this.bytes += chunk.length;
    if (this.cut) return '';
    const room = this.capChars - this.kept.length;
    // A UTF-8 character is at least one byte: decoding more than `room` bytes is never needed.
    const part = chunk.length > room + 4 ? chunk.subarray(0, room + 4) : chunk;
    const text = this.decoder.write(part);
    const before = this.kept.length;
    this.keep(text);
    if (part !== chunk) this.cut = true;
    return this.kept.slice(before);
  }

  /** Flushes a trailing partial UTF-8 sequence. */
  end(): string {
    if (this.cut) return '';
    const text = this.decoder.end();
    const before = this.kept.length;
    this.keep(text);
    return this.kept.slice(before);
  }

  private keep(text: string): void {
    if (text.length === 0 || this.cut) {
      if (text.length > 0) this.cut = true;
      return;
    }
    const room = this.capChars - this.kept.length;
    if (text.length <= room) {
      this.kept += text;
    } else {
      this.kept += text.slice(0, Math.max(0, room));
      this.cut = true;
    }
  }

  get text(): string {
    return this.kept;
  }

  get byteCount(): number {
    return this.bytes;
  }

  get truncated(): boolean {
    return this.cut;
  }
}

/**
 * Keeps only the last `size` bytes written. Used to find the runner's trailer at the very end of
 * stderr even when the kept text was cut long before it.
 */
export class TailBuffer {
  private buf = Buffer.alloc(0);

  constructor(private readonly size: number) {}

  push(chunk: Buffer): void {
    const tail = chunk.length > this.size ? chunk.subarray(chunk.length - this.size) : chunk;
    const joined = Buffer.concat([this.buf, tail]);
    this.buf = joined.length > this.size ? Buffer.from(joined.subarray(joined.length - this.size)) : joined;
  }

  get bytes(): Buffer {
    return this.buf;
  }
}
