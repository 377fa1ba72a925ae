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
