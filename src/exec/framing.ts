// The kernel protocol's framing (runtime/PROTOCOL.md): a header line with the byte length (1 to
// 20 ASCII digits), then exactly that many bytes of UTF-8 JSON, in both directions. Used on the
// long-lived exec stream to a session kernel, and by the runtime's tests.
export function encodeFrame(message: unknown): Buffer {
  const body = Buffer.from(JSON.stringify(message), 'utf8');
  return Buffer.concat([Buffer.from(`${body.length}\n`, 'ascii'), body]);
}

const MAX_HEADER_BYTES = 20;

/** Incremental decoder: push stream chunks in any split, get whole messages back. */
export class FrameDecoder {
  private buf: Buffer = Buffer.alloc(0);

  constructor(private readonly maxFrameBytes = 64 * 1024 * 1024) {}

  /** Returns the messages completed by this chunk; throws when the stream is not framed. */
  push(chunk: Buffer): unknown[] {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    const out: unknown[] = [];
    for (;;) {
      const nl = this.buf.indexOf(10);
      if (nl < 0) {
        if (this.buf.length > MAX_HEADER_BYTES) throw new Error('Malformed frame header: no newline within 20 bytes');
        return out;
      }
      const header = this.buf.subarray(0, nl).toString('latin1');
      if (!/^\d{1,20}$/.test(header)) throw new Error(`Malformed frame header ${JSON.stringify(header.slice(0, 32))}`);
      const size = Number(header);
      if (size > this.maxFrameBytes) throw new Error(`Frame of ${size} bytes exceeds the limit of ${this.maxFrameBytes}`);
      if (this.buf.length < nl + 1 + size) return out;
      out.push(JSON.parse(this.buf.subarray(nl + 1, nl + 1 + size).toString('utf8')));
      this.buf = this.buf.subarray(nl + 1 + size);
    }
  }

  /** Bytes of an incomplete frame still waiting for the rest. */
  get buffered(): number {
    return this.buf.length;
  }
}
