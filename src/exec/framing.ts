// The kernel protocol's framing (runtime/PROTOCOL.md): a header line with the byte length (1 to
// 20 ASCII digits), then exactly that many bytes of UTF-8 JSON, in both directions. Used on the
// long-lived exec stream to a session kernel, and by the runtime's tests.
import { ByteAccumulator } from '../util/byte-accumulator.js';

export function encodeFrame(message: unknown): Buffer {
  const body = Buffer.from(JSON.stringify(message), 'utf8');
  return Buffer.concat([Buffer.from(`${body.length}\n`, 'ascii'), body]);
}

const MAX_HEADER_BYTES = 20;
/** Chunks any frame may come in, whatever its size (see FrameDecoder's `minPieceBytes`). */
export const PIECES_SLACK = 16;
/** Without a limit from the caller: the runtime's own bound on a request (runtime/PROTOCOL.md). */
export const DEFAULT_MAX_FRAME_BYTES = 4 * 1024 * 1024;

/**
 * Objects and arrays in a JSON text outside its strings, counted up to `limit` + 1 (then it
 * stops). Strings are skipped with indexOf, so a text that is mostly strings (an image in base64,
 * a result's texts) costs next to nothing to count, while one made of containers is refused after
 * a few of them, before JSON.parse spends ~200 ms a MiB on nested arrays.
 */
export function containersUpTo(body: Buffer, limit: number): number {
  let n = 0;
  let i = 0;
  while (i < body.length) {
    const q = body.indexOf(0x22, i);
    const end = q < 0 ? body.length : q;
    for (let j = i; j < end; j++) {
      const c = body[j];
      if ((c === 0x7b || c === 0x5b) && ++n > limit) return n;
    }
    if (q < 0) return n;
    // The string ends at the next quote after an even number of backslashes.
    let from = q + 1;
    for (;;) {
      const e = body.indexOf(0x22, from);
      if (e < 0) return n; // unterminated: JSON.parse refuses it
      let b = e - 1;
      while (body[b] === 0x5c) b--;
      if ((e - 1 - b) % 2 === 0) {
        i = e + 1;
        break;
      }
      from = e + 1;
    }
  }
  return n;
}

/** Frames above `aboveBytes` may hold at most `maxContainers` objects and arrays (containersUpTo). */
export interface LargeFrameShape {
  aboveBytes: number;
  maxContainers: number;
}

export interface DecodedFrame {
  message: unknown;
  /** Bytes of the frame on the wire, header included. */
  bytes: number;
}

/**
 * Incremental decoder: push stream chunks in any split, get whole messages back. Linear in the
 * bytes pushed, in time and in memory: a body that arrives whole in one chunk is parsed where it
 * lies; one that spans chunks is copied into one growing buffer (byte-accumulator.ts), so a frame
 * trickled a byte per message costs O(size), never an object per message.
 */
export class FrameDecoder {
  private header = '';
  /** Body size of the frame being read, once its header is complete. */
  private bodySize: number | undefined;
  /** The body so far, when it spans chunks. */
  private body: ByteAccumulator | undefined;
  /** Chunks that brought bytes of the frame being read. */
  private pieces = 0;

  /**
   * `maxFrameBytes` is checked when a header completes, so a caller may lower or raise it between
   * frames. `minPieceBytes` (0: any split): a frame may come in at most PIECES_SLACK chunks plus
   * one per `minPieceBytes` of it, else the stream is not framed as a kernel writes it.
   */
  constructor(
    public maxFrameBytes = DEFAULT_MAX_FRAME_BYTES,
    private readonly minPieceBytes = 0,
    private readonly largeFrames?: LargeFrameShape,
  ) {}

  /** Returns the messages completed by this chunk; throws when the stream is not framed. */
  push(chunk: Buffer): unknown[] {
    return this.pushSized(chunk).map((f) => f.message);
  }

  /** As push, with each frame's size on the wire. After a throw the decoder is unusable. */
  pushSized(chunk: Buffer): DecodedFrame[] {
    const out: DecodedFrame[] = [];
    if (this.header.length > 0 || this.bodySize !== undefined) this.countPiece();
    let off = 0;
    while (off < chunk.length) {
      if (this.bodySize === undefined) {
        // A frame that starts in this chunk: its first piece.
        if (this.header.length === 0) this.pieces = 1;
        off = this.readHeader(chunk, off);
        continue;
      }
      const had = this.body?.size ?? 0;
      const take = Math.min(this.bodySize - had, chunk.length - off);
      const piece = chunk.subarray(off, off + take);
      off += take;
      if (had === 0 && take === this.bodySize) {
        out.push(this.finishFrame(piece));
        continue;
      }
      (this.body ??= new ByteAccumulator(this.bodySize)).append(piece);
      if (this.body.size === this.bodySize) out.push(this.finishFrame(this.body.take()));
    }
    // A zero-length body completes with its header.
    if (this.bodySize === 0) out.push(this.finishFrame(Buffer.alloc(0)));
    return out;
  }

  /** Another chunk of the frame being read: throws past the pieces its bytes so far allow. */
  private countPiece(): void {
    if (this.minPieceBytes <= 0) return;
    const allowed = PIECES_SLACK + Math.floor(this.buffered / this.minPieceBytes);
    if (++this.pieces > allowed) {
      throw new Error(`A frame came in more than ${allowed} pieces for its first ${this.buffered} bytes (a kernel writes each frame at once)`);
    }
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

  private finishFrame(body: Buffer): DecodedFrame {
    const bytes = this.header.length + 1 + body.length;
    const large = this.largeFrames;
    if (large && body.length > large.aboveBytes && containersUpTo(body, large.maxContainers) > large.maxContainers)
      throw new Error(
        `A frame of ${bytes} bytes holds more than ${large.maxContainers} objects and arrays (a kernel's frames above ${large.aboveBytes} bytes are texts)`,
      );
    this.header = '';
    this.bodySize = undefined;
    this.body = undefined;
    return { message: JSON.parse(body.toString('utf8')), bytes };
  }

  /** Bytes of an incomplete frame still waiting for the rest. */
  get buffered(): number {
    return this.bodySize === undefined ? this.header.length : this.header.length + 1 + (this.body?.size ?? 0);
  }

  /** Bytes allocated for them (at most about twice as many). */
  get held(): number {
    return this.header.length + (this.body?.capacity ?? 0);
  }
}
