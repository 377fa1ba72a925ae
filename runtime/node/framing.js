'use strict';
// Framing (runtime/PROTOCOL.md): a header line `<byte length>\n`, then that many bytes of UTF-8 JSON.

const MAX_FRAME_BYTES = 64 * 1024 * 1024;
const MAX_HEADER_BYTES = 20;

/** JSON.stringify escapes lone surrogates (Node 12+), so the body is always valid UTF-8. */
function encode(message) {
  const body = Buffer.from(JSON.stringify(message), 'utf8');
  return Buffer.concat([Buffer.from(`${body.length}\n`, 'ascii'), body]);
}

/** Incremental decoder: push stream chunks, get whole messages back; throws on garbage. */
class FrameDecoder {
  constructor() {
    this.buf = Buffer.alloc(0);
  }

  push(chunk) {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    const out = [];
    for (;;) {
      const nl = this.buf.indexOf(10);
      if (nl < 0) {
        if (this.buf.length > MAX_HEADER_BYTES) throw new Error('malformed frame header');
        return out;
      }
      const header = this.buf.subarray(0, nl).toString('latin1');
      if (!/^\d{1,20}$/.test(header)) throw new Error(`malformed frame header ${JSON.stringify(header.slice(0, 32))}`);
      const size = Number(header);
      if (size > MAX_FRAME_BYTES) throw new Error(`frame of ${size} bytes exceeds ${MAX_FRAME_BYTES}`);
      if (this.buf.length < nl + 1 + size) return out;
      out.push(JSON.parse(this.buf.subarray(nl + 1, nl + 1 + size).toString('utf8')));
      this.buf = this.buf.subarray(nl + 1 + size);
    }
  }
}

module.exports = { encode, FrameDecoder };
