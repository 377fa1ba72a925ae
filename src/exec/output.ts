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

  /** Adds raw bytes; returns the newly decoded text (for streaming), '' when nothing new. */
  push(chunk: Buffer): string {
    this.bytes += chunk.length;
    const text = this.decoder.write(chunk);
    this.keep(text);
    return text;
  }

  /** Flushes a trailing partial UTF-8 sequence. */
  end(): string {
    const text = this.decoder.end();
    this.keep(text);
    return text;
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
