import { describe, expect, it } from 'vitest';
import { cutToBytes, MAX_DEPTH, type CutWork } from '../../../src/codemode/cut.js';

const LIMIT = 65_536;
const bytes = (v: unknown): number => Buffer.byteLength(JSON.stringify(v));

function keys(n: number, value: (i: number) => unknown): Record<string, unknown> {
  const o: Record<string, unknown> = {};
  for (let i = 0; i < n; i++) o[`key_${i}`] = value(i);
  return o;
}

function nest(depth: number, inner: unknown, wrap: (v: unknown) => unknown): unknown {
  let v = inner;
  for (let i = 0; i < depth; i++) v = wrap(v);
  return v;
}

/** How many levels of arrays and objects `v` nests (iterative: inputs may be very deep). */
function depthOf(v: unknown): number {
  let deepest = 0;
  const todo: Array<[unknown, number]> = [[v, 0]];
  while (todo.length > 0) {
    const [x, d] = todo.pop()!;
    deepest = Math.max(deepest, d);
    if (typeof x === 'object' && x !== null) for (const c of Object.values(x)) todo.push([c, d + 1]);
  }
  return deepest;
}

const rows = (n: number): unknown[] => Array.from({ length: n }, (_, i) => ({ id: i, name: `row ${i} ✓ "quoted" 😀`, tags: ['a', 'b'], at: null }));
const tricky = '"\\\n\t\u0001\u007f é ✓ 😀 \u2028 \ud800 x';

/** The byte counts the cut reports, which must be the real ones. */
function reported(cut: string | undefined): { from: number; to: number } {
  const m = /^result cut from (\d+) to (\d+) bytes/.exec(cut ?? '');
  expect(m).not.toBeNull();
  return { from: Number(m![1]), to: Number(m![2]) };
}

describe('cutToBytes stays within the limit, whatever the shape', () => {
  it.each([
    ['32,000 keys with short strings', keys(32_000, () => 'v'.repeat(20)), LIMIT],
    ['32,000 keys with numbers (only keys can go)', keys(32_000, (i) => i), 40_000],
    ['2,000 keys just over the limit (overshot to 65,737 before)', keys(2_000, () => 'v'.repeat(20)), LIMIT],
    ['2,000-deep arrays around a 1 MB string', nest(2_000, 'x'.repeat(1_000_000), (v) => [v]), LIMIT],
    ['2,000-deep objects around a 1 MB string', nest(2_000, 'x'.repeat(1_000_000), (v) => ({ a: v })), LIMIT],
    ['a wide array of numbers', Array.from({ length: 200_000 }, (_, i) => i * 7), LIMIT],
    ['a wide array of objects', rows(50_000), LIMIT],
    ['a 4 MB string', 'y'.repeat(4 << 20), LIMIT],
    ['a long string of escapes and multi-byte characters', tricky.repeat(20_000), LIMIT],
    ['mixed: a page of rows next to small keys', { total: 50_000, next: 'cursor-2', rows: rows(50_000), blob: tricky.repeat(5_000) }, LIMIT],
    ['mixed: arrays of objects of arrays', Array.from({ length: 300 }, (_, i) => ({ i, list: rows(100), text: 'z'.repeat(i * 10) })), LIMIT],
    ['strings under a budget too small for "…"', { a: 'xxxxxxxxxx', b: 'yyyyyyyyyy' }, 18],
    ['a tiny limit on an object', { a: 'x'.repeat(100), b: [1, 2, 3] }, 2],
    ['a tiny limit on a string', 'x'.repeat(100), 4],
    ['a tiny limit on an array', [[1, 2], 'abc'], 3],
  ])('%s', (_name, value, limit) => {
    const r = cutToBytes(value, limit);
    expect(bytes(r.value)).toBeLessThanOrEqual(limit);
    expect(reported(r.cut)).toEqual({ from: bytes(value), to: bytes(r.value) });
  });

  it.each([
    ['an empty string', { a: 'x'.repeat(10), b: 'y'.repeat(10) }, 18, '1 strings shortened (ending in "…"), 1 strings emptied (no room for "…")'],
    ['keys', keys(100, (i) => i), 100, '91 object keys dropped'],
    ['array items', [1, 22, 333, 4444], 10, '1 array items dropped from the ends of arrays'],
  ])('says it cut %s', (_name, value, limit, said) => {
    expect(cutToBytes(value, limit).cut).toMatch(new RegExp(`: ${said.replace(/[()]/g, '\\$&')}$`));
  });

  it.each([3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 17, 30, 31, 32, 33, 100])('cuts escapes and surrogates exactly to %i bytes', (limit) => {
    const r = cutToBytes(tricky.repeat(5), limit);
    const s = r.value as string;
    expect(bytes(s)).toBeLessThanOrEqual(limit);
    expect(reported(r.cut).to).toBe(bytes(s));
    expect(s).not.toMatch(/\ud83d$/); // never half of 😀
    // The longest prefix: one more character would not fit.
    const kept = s.endsWith('…') ? s.slice(0, -1) : '';
    if (limit >= 5) expect(bytes(tricky.repeat(5).slice(0, kept.length + 2) + '…')).toBeGreaterThan(limit);
    if (limit < 5) expect(s).toBe('');
  });
});

describe('cutToBytes counts bytes as JSON.stringify writes them', () => {
  it.each([
    ['ASCII', 'plain'],
    ['quotes and backslashes', '"\\"'],
    ['short escapes', '\b\t\n\f\r'],
    ['other control characters', '\u0000\u0001\u001f\u007f'],
    ['two- and three-byte characters', 'é ß ✓ \u2028 \u2029 \uffff'],
    ['a surrogate pair', '😀'],
    ['lone surrogates', '\ud800 x \udfff \udc00\ud800'],
    ['a long mix', tricky.repeat(3)],
  ])('%s, in keys and values', (_name, s) => {
    const value = { [s]: s, list: [s, s], pad: 'p'.repeat(200) };
    const r = cutToBytes(value, 60);
    expect(reported(r.cut)).toEqual({ from: bytes(value), to: bytes(r.value) });
    expect(bytes(r.value)).toBeLessThanOrEqual(60);
  });
});

describe('cutToBytes keeps the shape', () => {
  it.each([
    ['a "__proto__" key stays a key', JSON.parse('{"__proto__": {"x": 1}, "big": "' + 'b'.repeat(100) + '"}'), 40, ['__proto__', 'big']],
    ['keys keep their order', { z: 'z'.repeat(50), a: 1, m: [1, 2, 3] }, 40, ['z', 'a', 'm']],
    ['keys go from the end when even empty values do not fit', keys(10, () => 'long value'), 40, ['key_0', 'key_1', 'key_2']],
  ])('%s', (_name, value, limit, expected) => {
    const r = cutToBytes(value, limit);
    expect(Object.keys(r.value as object)).toEqual(expected);
    expect(Object.getPrototypeOf(r.value)).toBe(Object.prototype);
    expect(bytes(r.value)).toBeLessThanOrEqual(limit);
  });

  it('leaves out what JSON leaves out, and writes a Date as JSON does', () => {
    const at = new Date(0);
    const value = { skip: undefined, at, list: [undefined, 'w'.repeat(100)] };
    const r = cutToBytes(value, 60);
    expect(bytes(r.value)).toBeLessThanOrEqual(60);
    expect(reported(r.cut)).toEqual({ from: bytes(value), to: bytes(r.value) });
    expect((r.value as { at: Date }).at).toBe(at);
  });

  it('refuses a circular value as JSON.stringify does', () => {
    const o: Record<string, unknown> = { a: 1 };
    o.self = [o];
    expect(() => cutToBytes(o, 10)).toThrow(TypeError);
  });
});

describe('cutToBytes empties what nests deeper than MAX_DEPTH', () => {
  it.each([
    ['a small deep value that fits', nest(100, 1, (v) => [v]), LIMIT],
    ['a deep value in an object that fits', { ok: 'yes', deep: nest(200, 'x', (v) => ({ a: v })) }, LIMIT],
    ['100,000 levels (JSON.stringify itself fails on it)', JSON.parse('['.repeat(100_000) + ']'.repeat(100_000)) as unknown, LIMIT],
  ])('%s', (_name, value, limit) => {
    const r = cutToBytes(value, limit);
    expect(depthOf(r.value)).toBeLessThanOrEqual(MAX_DEPTH);
    expect(bytes(r.value)).toBeLessThanOrEqual(limit);
    expect(r.cut).toMatch(/ 1 values nested deeper than 64 levels emptied$/);
  });

  it('keeps a value exactly MAX_DEPTH deep', () => {
    const value = nest(MAX_DEPTH, 1, (v) => [v]);
    expect(cutToBytes(value, LIMIT)).toEqual({ value });
  });
});

/** Work of one cut, per byte of input. */
function work(value: unknown, limit = LIMIT): number {
  const w: CutWork = { units: 0 };
  cutToBytes(value, limit, w);
  return w.units;
}

describe('cutToBytes does work linear in its input', () => {
  // Each shape at size n and 2n: twice the input may cost about twice the work (a quadratic cut
  // costs four times), and never more than a few units per byte of input.
  it.each([
    ['many keys', (n: number) => keys(n, () => 'v'.repeat(20))],
    ['many keys with numbers', (n: number) => keys(n, (i) => i)],
    ['deep arrays around a string', (n: number) => nest(n / 10, 'x'.repeat(n * 10), (v) => [v])],
    ['deep objects', (n: number) => nest(n / 10, { s: 's'.repeat(n) }, (v) => ({ a: v, b: 'b' }))],
    ['a wide array', (n: number) => Array.from({ length: n * 4 }, (_, i) => i)],
    ['a long string', (n: number) => tricky.repeat(n)],
    ['mixed', (n: number) => ({ total: n, rows: rows(n / 4), more: keys(n / 4, (i) => ({ i, s: 'q'.repeat(30) })) })],
  ])('%s', (_name, make) => {
    const n = 16_000;
    const [small, large] = [make(n), make(2 * n)];
    const [a, b] = [work(small), work(large)];
    expect(b / a).toBeLessThan(2.4);
    expect(b).toBeLessThan(4 * bytes(large));
  });
});
