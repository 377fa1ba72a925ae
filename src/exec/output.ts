// Collects one output stream of a running program while bounding memory: the first `capChars`
// characters are kept, the rest is only counted. Exec streams ignore back-pressure, so a program
// that prints 10 MB must not make the gateway hold 10 MB.
import { StringDecoder } from 'node:string_decoder';
import { cutUnits } from '../util/text.js';

/** Pieces of kept text held before they are joined into one string. */
const JOIN_PIECES = 1024;

export class CappedOutput {
  private readonly decoder = new StringDecoder('utf8');
  /**
   * The kept text in pieces, joined when read. Appending to one string and slicing what was new
   * off it made V8 copy the whole kept text on every push: a program that writes a byte at a time
   * cost O(cap²) (262,144 one-byte writes: 20 s of the event loop, measured).
   */
  private parts: string[] = [];
  private length = 0;
  private bytes = 0;
  private cut = false;

  constructor(private readonly capChars: number) {}

  /**
   * Adds raw bytes; returns the newly kept text (for streaming), '' when nothing new. Past the
   * cap, bytes are only counted: not even decoded, so 1 GB of output costs no garbage either.
   */
  push(chunk: Buffer): string {
    this.bytes += chunk.length;
    let streamed = '';
    // A character is at least one byte, so room + 4 bytes at a time are all a step decodes; but
    // multi-byte text fills less than the room (CJK: a third), so steps go on until the room is
    // full or the chunk is used up. Cutting the chunk after the first step lost text under the cap.
    for (let at = 0; at < chunk.length && !this.cut;) {
      const room = this.capChars - this.length;
      const end = Math.min(chunk.length, at + room + 4);
      streamed += this.keep(this.decoder.write(chunk.subarray(at, end)));
      at = end;
      if (at < chunk.length && this.length >= this.capChars) this.cut = true;
    }
    return streamed;
  }

  /** Flushes a trailing partial UTF-8 sequence. */
  end(): string {
    if (this.cut) return '';
    return this.keep(this.decoder.end());
  }

  /** Keeps what fits of `text` and returns it; never ends the kept text with half a surrogate pair. */
  private keep(text: string): string {
    if (text.length === 0 || this.cut) return '';
    const room = this.capChars - this.length;
    let kept = text;
    if (text.length > room) {
      kept = cutUnits(text, room, '');
      this.cut = true;
    }
    if (kept.length > 0) {
      this.parts.push(kept);
      this.length += kept.length;
      // Tiny pieces cost more heap than their text: joined now and then, bounded either way.
      if (this.parts.length >= JOIN_PIECES) this.parts = [this.parts.join('')];
    }
    return kept;
  }

  get text(): string {
    if (this.parts.length > 1) this.parts = [this.parts.join('')];
    return this.parts[0] ?? '';
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
