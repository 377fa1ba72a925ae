// Display items from a kernel (src/exec/display.ts): untrusted frames become images only when
// well-formed, of a closed set of types, with the right signature and within every cap;
// anything else becomes a note, and nothing throws.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { acceptDisplay, displayFrameBytes, finishDisplay, imageCounts, newTally, pngSize, type DisplayLimits } from '../../../src/exec/display.js';

const PNG_HEAD = Buffer.from('89504e470d0a1a0a0000000d49484452000001900000012c08060000', 'hex'); // IHDR 400x300
/** PNG_HEAD with its IHDR's length, type, width and height replaced. */
const pngHead = (width: number, height: number, type = 'IHDR', length = 13): Buffer => {
  const b = Buffer.from(PNG_HEAD);
  b.writeUInt32BE(length, 8);
  b.write(type, 12, 'latin1');
  b.writeUInt32BE(width, 16);
  b.writeUInt32BE(height, 20);
  return b;
};
const png = (extra = 0): string => Buffer.concat([PNG_HEAD, Buffer.alloc(extra)]).toString('base64');
const jpeg = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 0, 0, 0, 0]).toString('base64');
const LIMITS: DisplayLimits = { maxImageBytes: 1000, maxBytes: 1500, maxItems: 3 };

const image = (data: string, mime = 'image/png', extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  id: '1',
  type: 'display',
  kind: 'image',
  mime,
  data,
  ...extra,
});

describe('acceptDisplay', () => {
  it.each([
    ['a PNG', image(png()), { kind: 'image', mime: 'image/png', bytes: PNG_HEAD.length, width: 400, height: 300 }],
    ['a JPEG', image(jpeg, 'image/jpeg'), { kind: 'image', mime: 'image/jpeg', bytes: 9 }],
    ['a saved PNG', image(png(), 'image/png', { path: '/workspace/figures/3.png' }), { kind: 'image', path: '/workspace/figures/3.png' }],
    ['HTML', { kind: 'text', format: 'html', text: '<b>x</b>' }, { kind: 'text', format: 'html', text: '<b>x</b>' }],
    ['a table cut to the cap', { kind: 'text', format: 'table', text: 'x'.repeat(50) }, { kind: 'text', format: 'table', text: 'x'.repeat(20) }],
    [
      'a GIF',
      image(Buffer.from('GIF89a').toString('base64'), 'image/gif'),
      { kind: 'text', format: 'note', text: expect.stringContaining('only PNG and JPEG') },
    ],
    [
      'SVG',
      image(Buffer.from('<svg/>').toString('base64'), 'image/svg+xml'),
      { kind: 'text', format: 'note', text: expect.stringContaining('only PNG and JPEG') },
    ],
    [
      'a PNG that is not one',
      image(Buffer.from('not a png at all').toString('base64')),
      { kind: 'text', format: 'note', text: expect.stringContaining('not a PNG') },
    ],
    ['a JPEG that is a PNG', image(png(), 'image/jpeg'), { kind: 'text', format: 'note', text: expect.stringContaining('not a JPEG') }],
    [
      'a JPEG of only its signature',
      image(Buffer.from([0xff, 0xd8, 0xff]).toString('base64'), 'image/jpeg'),
      { kind: 'text', format: 'note', text: expect.stringContaining('not a JPEG') },
    ],
    [
      'a JPEG whose first marker is not one',
      image(Buffer.from([0xff, 0xd8, 0xff, 0x3c, 0x73, 0x76, 0x67]).toString('base64'), 'image/jpeg'),
      { kind: 'text', format: 'note', text: expect.stringContaining('not a JPEG') },
    ],
    ['a JPEG starting with a quantization table', image(Buffer.from([0xff, 0xd8, 0xff, 0xdb, 0, 0]).toString('base64'), 'image/jpeg'), { kind: 'image' }],
    ['a note from the kernel, cut to 500', { kind: 'text', format: 'note', text: 'n'.repeat(600) }, { kind: 'text', format: 'note', text: 'n'.repeat(500) }],
    // The signature alone is not a PNG: its IHDR must follow, valid, or its size claims are not shown.
    ['a PNG of 0x0', image(pngHead(0, 0).toString('base64')), { kind: 'text', format: 'note', text: expect.stringContaining('no valid IHDR') }],
    [
      'a PNG of 4294967295x1',
      image(pngHead(0xffffffff, 1).toString('base64')),
      { kind: 'text', format: 'note', text: expect.stringContaining('no valid IHDR') },
    ],
    ['a PNG without IHDR', image(pngHead(1, 1, 'IDAT').toString('base64')), { kind: 'text', format: 'note', text: expect.stringContaining('no valid IHDR') }],
    [
      'a PNG with a short IHDR',
      image(pngHead(1, 1, 'IHDR', 8).toString('base64')),
      { kind: 'text', format: 'note', text: expect.stringContaining('no valid IHDR') },
    ],
    [
      'a PNG of only its signature',
      image(PNG_HEAD.subarray(0, 8).toString('base64')),
      { kind: 'text', format: 'note', text: expect.stringContaining('not a PNG') },
    ],
    ['data that is not base64', image('@@@@'), { kind: 'text', format: 'note', text: expect.stringContaining('not base64') }],
    ['base64 of a wrong length', image('iVBOR'), { kind: 'text', format: 'note', text: expect.stringContaining('not base64') }],
    ['an image over the cap', image(png(1000)), { kind: 'text', format: 'note', text: expect.stringContaining('over the cap of 1000 bytes per image') }],
    [
      'a path outside the figures',
      image(png(), 'image/png', { path: '/etc/passwd' }),
      { kind: 'text', format: 'note', text: expect.stringContaining('not a valid display frame') },
    ],
    ['an unknown kind', { kind: 'video', data: '' }, { kind: 'text', format: 'note', text: expect.stringContaining('not a valid display frame') }],
    ['a number as text', { kind: 'text', format: 'html', text: 5 }, { kind: 'text', format: 'note' }],
    ['null', null, { kind: 'text', format: 'note' }],
  ])('%s', (_what, frame, want) => {
    const tally = newTally();
    expect(() => acceptDisplay(frame, tally, LIMITS, 20)).not.toThrow();
    expect(tally.items).toEqual([expect.objectContaining(want)]);
  });

  it('caps the bytes of images per call and the count of items, with a note for the rest', () => {
    const tally = newTally();
    for (let i = 0; i < 5; i++) acceptDisplay(image(png(600)), tally, LIMITS, 20);
    const items = finishDisplay(tally, LIMITS);
    expect(items.map((i) => i.kind)).toEqual(['image', 'image', 'text', 'text']);
    expect(items[2]).toMatchObject({ text: expect.stringContaining('over the cap of 1500 bytes of images per call') });
    expect(items[3]).toMatchObject({ format: 'note', text: '2 more display item(s) were not returned: at most 3 per call.' });
    expect(tally.bytes).toBe(2 * (PNG_HEAD.length + 600));
    expect(imageCounts(items)).toEqual({ images: { count: 2, bytes: tally.bytes } });
  });
});

it('holds the kept part of a cut text, not the whole text of its frame', () => {
  // A cut of a long string is a view that keeps it all alive (V8): 10 display texts of 3 MB cut
  // to 50,000 characters held 33 MB. Here 20 calls' tallies, each holding one: ~66 MB before,
  // ~10 MB now (the last frame's own strings are still in the heap when it is measured).
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const tallies = Array.from({ length: 20 }, () => newTally());
  gc();
  const before = process.memoryUsage().heapUsed;
  tallies.forEach((tally, i) => {
    const frame = JSON.stringify({ id: '1', type: 'display', kind: 'text', format: 'html', text: `${i}${'y'.repeat(3_000_000)}` });
    acceptDisplay(JSON.parse(frame), tally, LIMITS, 50_000);
    acceptDisplay(JSON.parse(JSON.stringify({ kind: 'text', format: 'note', text: 'n'.repeat(3_000_000) })), tally, LIMITS, 50_000);
  });
  gc();
  const grown = process.memoryUsage().heapUsed - before;
  expect(tallies.map((t) => t.items.map((i) => (i.kind === 'text' ? i.text.length : 0)))).toEqual(Array<number[]>(20).fill([50_000, 500]));
  expect(grown).toBeLessThan(30_000_000);
});

describe("the texts of one call share the call's cap (notes aside)", () => {
  const text = (n: number, format = 'html'): Record<string, unknown> => ({ kind: 'text', format, text: 'x'.repeat(n) });
  const SHARED = expect.stringContaining('share the cap of 20 characters');
  it.each([
    ['two that fit', [text(8), text(12)], ['x'.repeat(8), 'x'.repeat(12)]],
    ['the second cut to what is left', [text(15), text(15, 'table')], ['x'.repeat(15), 'x'.repeat(5)]],
    ['a third with nothing left', [text(15), text(15), text(1, 'text')], ['x'.repeat(15), 'x'.repeat(5), SHARED]],
    ['notes do not count', [text(300, 'note'), text(20)], ['x'.repeat(300), 'x'.repeat(20)]],
    ['an emoji counts once, and is not split', [text(19), { kind: 'text', format: 'text', text: '😀😀' }], ['x'.repeat(19), '😀']],
  ])('%s', (_what, frames, want) => {
    const tally = newTally();
    for (const f of frames) acceptDisplay(f, tally, { ...LIMITS, maxItems: 10 }, 20);
    expect(tally.items.map((i) => (i.kind === 'text' ? i.text : i.kind))).toEqual(want);
  });
});

it('keeps the kernel’s own note on what it left out, once, beyond the count cap', () => {
  const tally = newTally();
  const kernelNote = { kind: 'text', format: 'note', text: '4 more display item(s) were not returned: at most 3 per call' };
  for (let i = 0; i < 3; i++) acceptDisplay(image(png()), tally, LIMITS, 100);
  acceptDisplay(kernelNote, tally, LIMITS, 100);
  acceptDisplay(kernelNote, tally, LIMITS, 100);
  const items = finishDisplay(tally, LIMITS);
  expect(items.map((i) => (i.kind === 'text' ? i.text : i.kind))).toEqual([
    'image',
    'image',
    'image',
    kernelNote.text,
    '1 more display item(s) were not returned: at most 3 per call.',
  ]);
});

describe('display helpers', () => {
  it.each([
    [PNG_HEAD, { width: 400, height: 300 }],
    [PNG_HEAD.subarray(0, 20), undefined],
    [Buffer.from('89504e470d0a1a0a0000000d49444154000001900000012c', 'hex'), undefined],
    [pngHead(0x7fffffff, 1), { width: 0x7fffffff, height: 1 }],
    [pngHead(0x80000000, 1), undefined],
    [pngHead(1, 0), undefined],
    [pngHead(1, 1, 'IHDR', 14), undefined],
  ])('pngSize(%#)', (head, want) => {
    expect(pngSize(head)).toEqual(want);
  });

  it.each([
    [{ maxImageBytes: 3, maxBytes: 3, maxItems: 1 }, 4 + 8192],
    [{ maxImageBytes: 2 * 1024 * 1024, maxBytes: 0, maxItems: 0 }, 2796204 + 8192],
  ])('displayFrameBytes(%j) covers a base64 image at the cap', (limits, want) => {
    expect(displayFrameBytes(limits)).toBe(want);
  });

  it('imageCounts is empty without images', () => {
    expect(imageCounts(undefined)).toEqual({});
    expect(imageCounts([{ kind: 'text', format: 'note', text: 'x' }])).toEqual({});
  });
});
