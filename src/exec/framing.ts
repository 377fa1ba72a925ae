// The kernel protocol's framing (runtime/PROTOCOL.md): a header line with the byte length, then
// exactly that many bytes of UTF-8 JSON. Used on the long-lived exec stream to a session kernel.
export function encodeFrame(message: unknown): Buffer {
  const body = Buffer.from(JSON.stringify(message), 'utf8');
  return Buffer.concat([Buffer.from(`${body.length}\n`, 'ascii'), body]);
}

/** Incremental decoder: feed it stream chunks, get whole messages back. */
export class FrameDecoder {
  private buf: Buffer = Buffer.alloc(0);

  constructor(private readonly maxFrameBytes = 64 * 1024 * 1024) {}

  push(chunk: Buffer): unknown[] {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    const out: unknown[] = [];
    for (;;) {
      const nl = this.buf.indexOf(10);
      if (nl < 0) {
        if (this.buf.length > 32) throw new Error('Malformed frame header from the kernel');
        return out;
      }
      const header = this.buf.subarray(0, nl).toString('ascii');
      if (!/^\d+$/.test(header)) throw new Error(`Malformed frame header from the kernel: ${JSON.stringify(header.slice(0, 32))}`);
      const len = Number(header);
      if (len > this.maxFrameBytes) throw new Error(`Frame of ${len} bytes exceeds ${this.maxFrameBytes}`);
      if (this.buf.length < nl + 1 + len) return out;
      out.push(JSON.parse(this.buf.subarray(nl + 1, nl + 1 + len).toString('utf8')));
      this.buf = this.buf.subarray(nl + 1 + len);
    }
  }
}
