import { describe, expect, it } from 'vitest';
import { characters, cutUnits, cutUtf8 } from '../../../src/util/text.js';

describe('cutUnits', () => {
  it.each([
    ['fits', 'abc', 3, '…', 'abc'],
    ['cut with the tail inside the bound', 'abcdef', 4, '…', 'abc…'],
    ['cut without a tail', 'abcdef', 4, '', 'abcd'],
    ['a pair at the cut is dropped whole', 'ab😀cd', 4, '…', 'ab…'],
    ['a pair before the cut stays', 'a😀bcd', 4, '…', 'a😀…'],
    ['a bound of zero', 'abc', 0, '', ''],
    ['a bound smaller than the tail', 'abc', 0, '…', ''],
  ])('%s', (_name, text, max, tail, want) => {
    const out = cutUnits(text, max, tail);
    expect(out).toBe(want);
    expect(out.length).toBeLessThanOrEqual(max);
    expect(Buffer.from(out, 'utf8').toString('utf8')).toBe(out);
  });
});

describe('cutUtf8', () => {
  it.each([
    ['fits', 'abc', 3, 'abc'],
    ['ASCII cut with the tail inside the bound', 'abcdefgh', 6, 'abc…'],
    ['two-byte characters', 'é'.repeat(1000), 1024, `${'é'.repeat(510)}…`],
    ['astral characters are cut whole', '😀'.repeat(1000), 1024, `${'😀'.repeat(255)}…`],
    ['three-byte text that fits exactly', '漢'.repeat(3), 9, '漢漢漢'],
  ])('%s', (_name, text, max, want) => {
    const out = cutUtf8(text, max);
    expect(out).toBe(want);
    expect(Buffer.byteLength(out)).toBeLessThanOrEqual(max);
  });
});

describe('characters (as the API server counts maxLength)', () => {
  it.each([
    ['empty', '', 0],
    ['ASCII', 'abc', 3],
    ['two-byte characters', 'éé', 2],
    ['an astral character is one (two UTF-16 units)', 'a\u{1F600}b', 3],
    ['a combining mark is a character of its own', 'jose\u0301', 5],
    ['an unpaired surrogate is one (stored as U+FFFD)', 'x\uD800', 2],
  ])('%s', (_name, text, want) => {
    expect(characters(text)).toBe(want);
  });
});
