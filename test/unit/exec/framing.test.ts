// The gateway's frame decoder: any split, linear reassembly (in time and memory), and the header
// and size checks.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { FrameDecoder, PIECES_SLACK, containersUpTo, encodeFrame } from '../../../src/exec/framing.js';

const frames = [{ id: '1', type: 'pong' }, { id: '2', type: 'output', stream: 'stdout', text: 'héllo ✓ 🎉\n' }, { t: '' }, null, 4];

function split(buf: Buffer, sizes: number[]): Buffer[] {
  const out: Buffer[] = [];
  let off = 0;
  for (let i = 0; off < buf.length; i++) {
    const n = sizes[i % sizes.length] as number;
    out.push(buf.subarray(off, off + n));
    off += n;
  }
  return out;
}

describe('FrameDecoder', () => {
  const wire = Buffer.concat(frames.map(encodeFrame));

  it.each([[[1]], [[2]], [[3, 1, 7]], [[1000]], [[wire.length]]])('decodes any split (chunk sizes %j)', (sizes) => {
    const d = new FrameDecoder();
    const out = split(wire, sizes).flatMap((c) => d.push(c));
    expect(out).toEqual(frames);
    expect(d.buffered).toBe(0);
  });

  it("reports each frame's size on the wire", () => {
    const d = new FrameDecoder();
    expect(d.pushSized(wire).map((f) => f.bytes)).toEqual(frames.map((f) => encodeFrame(f).length));
  });

  it.each([
    ['the header so far', '12', 2],
    ['a header and part of the body', '5\n{"a"', 6],
    ['nothing after a whole frame', '2\n{}', 0],
  ])('counts buffered bytes: %s', (_name, input, buffered) => {
    const d = new FrameDecoder();
    d.push(Buffer.from(input));
    expect(d.buffered).toBe(buffered);
  });

  it.each([
    ['a non-numeric header', 'abc\n{}', /Malformed frame header "abc"/],
    ['a negative length', '-1\n', /Malformed frame header "-1"/],
    ['an empty header', '\n{}', /Malformed frame header ""/],
    ['a header without newline', '1'.repeat(21), /no newline/],
    ['a header split without newline', ['1'.repeat(15), '1'.repeat(6)], /no newline/],
    ['a frame above the limit', '2000\n', /exceeds the limit of 1000/],
    ['a 64 MiB frame', `${64 * 1024 * 1024}\n`, /exceeds the limit/],
    ['a body that is not JSON', '3\nabc', /JSON/],
    ['an empty body', '0\n', /JSON/],
  ])('rejects %s', (_name, input, error) => {
    const d = new FrameDecoder(1000);
    const chunks = (Array.isArray(input) ? input : [input]).map((s) => Buffer.from(s));
    expect(() => chunks.forEach((c) => d.push(c))).toThrow(error);
  });

  it('applies a limit lowered between frames to the next header', () => {
    const d = new FrameDecoder(1000);
    expect(d.push(encodeFrame({ a: 'x'.repeat(100) }))).toHaveLength(1);
    d.maxFrameBytes = 50;
    expect(() => d.push(encodeFrame({ a: 'x'.repeat(100) }))).toThrow(/exceeds the limit of 50/);
  });

  it('reassembles a frame sent one byte at a time in linear time', () => {
    // 2 MB in 1-byte chunks: quadratic concatenation would copy ~2 TB and never finish.
    const body = { text: 'y'.repeat(2_000_000) };
    const buf = encodeFrame(body);
    const d = new FrameDecoder(4_000_000);
    let out: unknown[] = [];
    for (let i = 0; i < buf.length; i++) out = out.concat(d.push(buf.subarray(i, i + 1)));
    expect(out).toEqual([body]);
  });

  it('holds memory for the bytes of a frame sent one byte per message, not for the messages', () => {
    // A hostile program writes its stream a byte at a time: each write arrives as a message of its
    // own. A Buffer kept per message cost ~100 bytes of heap per byte (3 MB held 325 MB).
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const frame = encodeFrame({ text: 'z'.repeat(1_000_000) });
    const d = new FrameDecoder(2_000_000);
    gc();
    const before = process.memoryUsage().heapUsed;
    const half = frame.length >> 1;
    for (let i = 0; i < half; i++) d.push(Buffer.from(frame.subarray(i, i + 1)));
    gc();
    const grown = process.memoryUsage().heapUsed - before;
    // Half a megabyte received: a few MB of heap at most (a Buffer kept per message: ~50 MB).
    expect(grown).toBeLessThan(8_000_000);
    expect(d.buffered).toBe(half);
    expect(d.held).toBeLessThanOrEqual(2 * half);
  });

  const big = encodeFrame({ text: 'w'.repeat(200_000) });
  const small = encodeFrame({ id: '1', type: 'pong' });
  it.each([
    ['a small frame in as many pieces as the slack', small, [Math.ceil(small.length / PIECES_SLACK)], true],
    ['a big frame in 4 KiB pieces (a pipe page)', big, [4096], true],
    ['a big frame in 256-byte pieces', big, [256], true],
    ['a big frame in uneven pieces averaging 512 bytes', big, [1, 1023], true],
    ['a small frame a byte at a time', small, [1], false],
    ['a big frame a byte at a time', big, [1], false],
    ['a big frame in 100-byte pieces', big, [100], false],
  ])('with a minimum piece size of 256: %s', (_name, wire, sizes, decodes) => {
    const d = new FrameDecoder(1_000_000, 256);
    const push = (): unknown[] => split(wire, sizes).flatMap((c) => d.push(c));
    if (decodes) expect(push()).toHaveLength(1);
    else expect(push).toThrow(/A frame came in more than \d+ pieces/);
  });

  it('counts the pieces of each frame on its own', () => {
    const d = new FrameDecoder(1_000_000, 256);
    const frames = Array.from({ length: 50 }, () => small);
    // Each frame in the slack's number of pieces, fifty frames in a row: never a breach.
    const out = frames.flatMap((f) => split(f, [Math.ceil(f.length / PIECES_SLACK)]).flatMap((c) => d.push(c)));
    expect(out).toHaveLength(50);
  });
});

describe('containersUpTo (objects and arrays outside strings)', () => {
  it.each<[string, string, number, number]>([
    ['none', '"x"', 10, 0],
    ['an object with an array', '{"a": [1, 2], "b": {}}', 10, 3],
    ['brackets inside strings', '{"a": "[[[{{{", "b": "]]"}', 10, 1],
    ['an escaped quote inside a string', '{"a": "x\\"[[[", "b": 1}', 10, 1],
    ['an escaped backslash before the closing quote', '{"a": "x\\\\", "b": [[]]}', 10, 3],
    ['three backslashes: an escaped quote', '{"a": "x\\\\\\"[", "b": []}', 10, 2],
    ['nested arrays, stopping past the limit', '['.repeat(100_000) + ']'.repeat(100_000), 64, 65],
    ['an unterminated string', '[{"a": "[[[[', 10, 2],
  ])('%s', (_, text, limit, n) => {
    expect(containersUpTo(Buffer.from(text), limit)).toBe(n);
  });
});

describe('FrameDecoder with a shape for large frames (the kernel stream: above 1 MiB, at most 64 containers)', () => {
  const shape = { aboveBytes: 1024 * 1024, maxContainers: 64 };
  const frame = (body: string): Buffer => Buffer.concat([Buffer.from(`${Buffer.byteLength(body)}\n`), Buffer.from(body)]);
  it.each<[string, Buffer, boolean]>([
    ['an image of 2 MiB in base64', encodeFrame({ id: '1', type: 'display', kind: 'image', mime: 'image/png', data: 'A'.repeat(2_800_000) }), true],
    [
      'a result of texts full of escaped quotes',
      encodeFrame({ id: '1', type: 'result', status: 'ok', stdout: '"{}"'.repeat(400_000), error: { ename: 'E' } }),
      true,
    ],
    [
      'a frame of 1 MiB of arrays (a call frame may be)',
      encodeFrame({ id: '1', type: 'call', args: { rows: Array.from({ length: 100_000 }, () => [1]) } }),
      true,
    ],
    ['a frame above 1 MiB of nested arrays', frame(`{"id": "1", "type": "display", "pad": ${'['.repeat(600_000)}${']'.repeat(600_000)}}`), false],
    ['a frame above 1 MiB of small objects', frame(`{"id": "1", "type": "output", "pad": [${Array.from({ length: 400_000 }, () => '{}').join(',')}]}`), false],
  ])('%s', (_, wire, decodes) => {
    const d = new FrameDecoder(4_000_000, 0, shape);
    if (decodes) expect(d.push(wire)).toHaveLength(1);
    else expect(() => d.push(wire)).toThrow(/holds more than 64 objects and arrays \(a kernel's frames above 1048576 bytes are texts\)/);
  });
});
