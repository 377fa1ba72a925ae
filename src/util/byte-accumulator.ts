// Bytes that arrive in pieces, kept in one buffer that grows by doubling. What a sandbox pod
// writes reaches the gateway as one exec-stream message per write of the program at the other
// end, so a hostile program that writes one byte at a time sends a message per byte: keeping the
// messages themselves (a Buffer object of ~100 bytes of heap each) would cost the gateway memory
// per message, not per byte — 3 MB trickled this way held 325 MB (docs/performance.md). Here
// memory follows the bytes (at most twice them, never above `limit`) and each byte is copied at
// most twice. Hand-written: Node has no growable buffer, and the list-based libraries (bl) keep
// one object per piece, which is what this avoids.
const EMPTY = Buffer.alloc(0);
/** The first allocation: small messages do not start by doubling from a few bytes. */
const MIN_CAPACITY = 4096;

export class ByteAccumulator {
  private buf: Buffer = EMPTY;
  private used = 0;

  /** `limit`: the most bytes this will hold (the capacity never grows past it, unless needed). */
  constructor(private readonly limit = Number.POSITIVE_INFINITY) {}

  append(piece: Uint8Array): void {
    const need = this.used + piece.length;
    if (need > this.buf.length) {
      const capacity = Math.max(need, Math.min(Math.max(this.buf.length * 2, MIN_CAPACITY), this.limit));
      const next = Buffer.allocUnsafe(capacity);
      this.buf.copy(next, 0, 0, this.used);
      this.buf = next;
    }
    this.buf.set(piece, this.used);
    this.used = need;
  }

  /** Bytes appended since the last take(). */
  get size(): number {
    return this.used;
  }

  /** Bytes allocated to hold them. */
  get capacity(): number {
    return this.buf.length;
  }

  /** The bytes appended so far, as one Buffer: valid until the next append() or take(). */
  view(): Buffer {
    return this.buf.subarray(0, this.used);
  }

  /** The bytes appended, as one Buffer; the accumulator is empty again and lets go of them. */
  take(): Buffer {
    const out = this.buf.subarray(0, this.used);
    this.buf = EMPTY;
    this.used = 0;
    return out;
  }
}
