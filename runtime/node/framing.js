'use strict';
// Framing (runtime/PROTOCOL.md): a header line `<byte length>\n`, then that many bytes of UTF-8 JSON.

// The largest request the gateway sends: code and stdin of at most 256 KiB each, every byte
// JSON-escaped to at most 6 (\u00XX), plus the other fields: 3 MiB, rounded up.
const MAX_FRAME_BYTES = 4 * 1024 * 1024;
const MAX_HEADER_BYTES = 20;

/** JSON.stringify escapes lone surrogates (Node 12+), so the body is always valid UTF-8. */
function encode(message) {
  const body = Buffer.from(JSON.stringify(message), 'utf8');
  return Buffer.concat([Buffer.from(`${body.length}\n`, 'ascii'), body]);
}

/**
 * Incremental decoder: push stream chunks, get whole messages back; throws on garbage. Linear:
 * a body's chunks are kept as they came and joined once, when the whole frame is there.
 */
class FrameDecoder {
  constructor(maxFrameBytes = MAX_FRAME_BYTES) {
    this.maxFrameBytes = maxFrameBytes;
    this.header = '';
    this.size = -1; // body size once the header is complete
    this.chunks = [];
    this.got = 0;
  }

  push(chunk) {
    const out = [];
    let off = 0;
    while (off < chunk.length || this.size === 0) {
      if (this.size < 0) {
        const nl = chunk.indexOf(10, off);
        const end = nl < 0 ? chunk.length : nl;
        if (this.header.length + end - off > MAX_HEADER_BYTES) throw new Error('malformed frame header');
        this.header += chunk.toString('latin1', off, end);
        if (nl < 0) return out;
        off = nl + 1;
        if (!/^\d{1,20}$/.test(this.header)) throw new Error(`malformed frame header ${JSON.stringify(this.header.slice(0, 32))}`);
        const size = Number(this.header);
        if (size > this.maxFrameBytes) throw new Error(`frame of ${size} bytes exceeds ${this.maxFrameBytes}`);
        this.size = size;
        continue;
      }
      const take = Math.min(this.size - this.got, chunk.length - off);
      this.chunks.push(chunk.subarray(off, off + take));
      this.got += take;
      off += take;
      if (this.got === this.size) {
        const body = Buffer.concat(this.chunks, this.size);
        this.header = '';
        this.size = -1;
        this.chunks = [];
        this.got = 0;
        out.push(JSON.parse(body.toString('utf8')));
      }
    }
    return out;
  }
}

module.exports = { encode, FrameDecoder, MAX_FRAME_BYTES };
