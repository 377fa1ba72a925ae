import { describe, expect, it } from 'vitest';
import { CappedOutput, TailBuffer } from '../../../src/exec/output.js';

describe('CappedOutput', () => {
  it.each([
    { cap: 10, chunks: ['hello'], text: 'hello', bytes: 5, truncated: false },
    { cap: 5, chunks: ['hello'], text: 'hello', bytes: 5, truncated: false },
    { cap: 4, chunks: ['hello'], text: 'hell', bytes: 5, truncated: true },
    { cap: 6, chunks: ['abc', 'def', 'ghi'], text: 'abcdef', bytes: 9, truncated: true },
    { cap: 3, chunks: ['ééé', 'é'], text: 'ééé', bytes: 8, truncated: true },
    { cap: 100, chunks: ['x'.repeat(1000)], text: 'x'.repeat(100), bytes: 1000, truncated: true },
    // Multi-byte text in one big chunk is kept up to the cap (it was cut at a third of it).
    { cap: 50_000, chunks: ['漢'.repeat(20_000)], text: '漢'.repeat(20_000), bytes: 60_000, truncated: false },
    { cap: 10, chunks: ['漢'.repeat(12)], text: '漢'.repeat(10), bytes: 36, truncated: true },
    // A cut never leaves half a surrogate pair at the end.
    { cap: 3, chunks: ['😀', '😀'], text: '😀', bytes: 8, truncated: true },
    { cap: 3, chunks: ['😀😀😀'], text: '😀', bytes: 12, truncated: true },
    { cap: 4, chunks: ['a😀😀'], text: 'a😀', bytes: 9, truncated: true },
  ])('keeps $cap chars of $chunks.length chunks', ({ cap, chunks, text, bytes, truncated }) => {
    const out = new CappedOutput(cap);
    for (const c of chunks) out.push(Buffer.from(c));
    out.end();
    expect(out.text).toBe(text);
    expect(out.byteCount).toBe(bytes);
    expect(out.truncated).toBe(truncated);
  });

  it('decodes a multi-byte character split across chunks', () => {
    const out = new CappedOutput(10);
    const euro = Buffer.from('€');
    const streamed = [out.push(euro.subarray(0, 1)), out.push(euro.subarray(1)), out.end()];
    expect(streamed.join('')).toBe('€');
    expect(out.text).toBe('€');
  });

  it('keeps output written a byte at a time in pieces, joined only now and then', () => {
    // Each write of a program can arrive as a message of its own; the kept text was one string
    // copied whole on every push (262,144 one-byte pushes: 20 s of the event loop, measured). No
    // clock here: the pieces it holds between joins show the copying is bounded.
    const cap = 262_144;
    const out = new CappedOutput(cap);
    const one = Buffer.from('x');
    let streamed = 0;
    let most = 0;
    for (let i = 0; i < cap + 100; i++) {
      streamed += out.push(one).length;
      most = Math.max(most, (out as unknown as { parts: string[] }).parts.length);
    }
    expect(most).toBeGreaterThan(1);
    expect(most).toBeLessThanOrEqual(1024);
    expect(streamed).toBe(cap);
    expect(out.text).toBe('x'.repeat(cap));
    expect(out.truncated).toBe(true);
  });

  it('streams only what it keeps', () => {
    const out = new CappedOutput(4);
    expect(out.push(Buffer.from('abc'))).toBe('abc');
    expect(out.push(Buffer.from('def'))).toBe('d');
    expect(out.push(Buffer.from('ghi'))).toBe('');
    expect(out.byteCount).toBe(9);
  });
});

describe('TailBuffer', () => {
  it.each([
    [8, ['abc'], 'abc'],
    [8, ['abcdef', 'ghijkl'], 'efghijkl'],
    [4, ['abcdefghij'], 'ghij'],
    [4, ['ab', 'cd', 'ef'], 'cdef'],
  ])('keeps the last %i bytes of %j', (size, chunks, tail) => {
    const t = new TailBuffer(size);
    for (const c of chunks) t.push(Buffer.from(c));
    expect(t.bytes.toString()).toBe(tail);
  });
});
