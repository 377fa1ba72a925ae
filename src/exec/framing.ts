// The kernel protocol's framing (runtime/PROTOCOL.md): a header line with the byte length (1 to
// 20 ASCII digits), then exactly that many bytes of UTF-8 JSON, in both directions. Used on the
// long-lived exec stream to a session kernel, and by the runtime's tests.
export function encodeFrame(message: unknown): Buffer {
  const body = Buffer.from(JSON.stringify(message), 'utf8');
  return Buffer.concat([Buffer.from(`${body.length}\n`, 'ascii'), body]);
}

const MAX_HEADER_BYTES = 20;
/** Without a limit from the caller: the runtime's own bound on a request (runtime/PROTOCOL.md). */
export const DEFAULT_MAX_FRAME_BYTES = 4 * 1024 * 1024;

export interface DecodedFrame {
  message: unknown;
  /** Bytes of the frame on the wire, header included. */
  bytes: number;
}

/**
 * Incremental decoder: push stream chunks in any split, get whole messages back. Linear in the
 * bytes pushed: a body's chunks are kept as they came and concatenated once, when the whole
 * frame is there (a frame arriving in n small chunks costs O(size), not O(n × size)).
 */
export class FrameDecoder {
  private header = '';
  /** Body size of the frame being read, once its header is complete. */
  private bodySize: number | undefined;
  private chunks: Buffer[] = [];
  private bodyBytes = 0;

  /** Checked when a header completes, so a caller may lower or raise it between frames. */
  constructor(public maxFrameBytes = DEFAULT_MAX_FRAME_BYTES) {}

  /** Returns the messages completed by this chunk; throws when the stream is not framed. */
  push(chunk: Buffer): unknown[] {
    return this.pushSized(chunk).map((f) => f.message);
  }

  /** As push, with each frame's size on the wire. After a throw the decoder is unusable. */
  pushSized(chunk: Buffer): DecodedFrame[] {
    const out: DecodedFrame[] = [];
    let off = 0;
    while (off < chunk.length) {
      if (this.bodySize === undefined) {
        off = this.readHeader(chunk, off);
        continue;
      }
      const take = Math.min(this.bodySize - this.bodyBytes, chunk.length - off);
      this.chunks.push(chunk.subarray(off, off + take));
      this.bodyBytes += take;
      off += take;
      if (this.bodyBytes === this.bodySize) out.push(this.finishFrame());
    }
    // A zero-length body completes with its header.
    if (this.bodySize === 0) out.push(this.finishFrame());
    return out;
  }

  /** Consumes header bytes from chunk[off..]; returns the new offset. */
  private readHeader(chunk: Buffer, off: number): number {
    const nl = chunk.indexOf(10, off);
    const end = nl < 0 ? chunk.length : nl;
    if (this.header.length + (end - off) > MAX_HEADER_BYTES) {
      if (nl < 0) throw new Error('Malformed frame header: no newline within 20 bytes');
      throw new Error(`Malformed frame header ${JSON.stringify((this.header + chunk.subarray(off, end).toString('latin1')).slice(0, 32))}`);
    }
    this.header += chunk.subarray(off, end).toString('latin1');
    if (nl < 0) return end;
    if (!/^\d{1,20}$/.test(this.header)) throw new Error(`Malformed frame header ${JSON.stringify(this.header.slice(0, 32))}`);
    const size = Number(this.header);
    if (size > this.maxFrameBytes) throw new Error(`Frame of ${size} bytes exceeds the limit of ${this.maxFrameBytes}`);
    this.bodySize = size;
    return nl + 1;
  }

  private finishFrame(): DecodedFrame {
    const size = this.bodySize ?? 0;
    const bytes = this.header.length + 1 + size;
    const body = this.chunks.length === 1 ? (this.chunks[0] as Buffer) : Buffer.concat(this.chunks, size);
    this.header = '';
    this.bodySize = undefined;
    this.chunks = [];
    this.bodyBytes = 0;
    return { message: JSON.parse(body.toString('utf8')), bytes };
  }

  /** Bytes of an incomplete frame still waiting for the rest. */
  get buffered(): number {
    return this.bodySize === undefined ? this.header.length : this.header.length + 1 + this.bodyBytes;
  }
}
