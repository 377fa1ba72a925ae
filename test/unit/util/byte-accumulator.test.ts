// The growing buffer that keeps a stream's bytes: the same bytes back in any split, memory that
// follows the bytes (never the number of pieces), a limit on its capacity, and emptied by take().
import { describe, expect, it } from 'vitest';
import { ByteAccumulator } from '../../../src/util/byte-accumulator.js';

function pieces(total: number, sizes: number[]): Buffer[] {
  const data = Buffer.from(Array.from({ length: total }, (_, i) => i % 251));
  const out: Buffer[] = [];
  for (let off = 0, i = 0; off < total; i++) {
    const n = sizes[i % sizes.length] as number;
    out.push(data.subarray(off, off + n));
    off += n;
  }
  return out;
}

describe('ByteAccumulator', () => {
  it.each([
    ['one piece', 10_000, [10_000]],
    ['one byte at a time', 100_000, [1]],
    ['uneven pieces', 100_000, [1, 7, 3000, 2]],
    ['pieces larger than the doubling', 50_000, [20_000]],
    ['nothing', 0, [1]],
  ])('%s: the bytes come back in order, in at most twice their size', (_name, total, sizes) => {
    const acc = new ByteAccumulator();
    const all = pieces(total, sizes);
    let overAllocated = 0;
    for (const p of all) {
      acc.append(p);
      if (acc.capacity > Math.max(2 * acc.size, 4096)) overAllocated++;
    }
    expect(overAllocated).toBe(0);
    expect(acc.size).toBe(total);
    expect(acc.take().equals(Buffer.concat(all))).toBe(true);
    expect([acc.size, acc.capacity]).toEqual([0, 0]);
  });

  it.each([
    ['below the first allocation', 100, 100],
    ['between two doublings', 10_000, 10_000],
  ])('never allocates past its limit (%s)', (_name, limit, expected) => {
    const acc = new ByteAccumulator(limit);
    for (const p of pieces(limit, [1])) acc.append(p);
    expect(acc.capacity).toBe(expected);
  });

  it('holds what it must even past its limit', () => {
    const acc = new ByteAccumulator(10);
    acc.append(Buffer.alloc(25, 1));
    expect([acc.size, acc.capacity]).toEqual([25, 25]);
  });

  it('starts over after take(), the taken bytes unchanged by later appends', () => {
    const acc = new ByteAccumulator();
    acc.append(Buffer.from('first'));
    const first = acc.take();
    acc.append(Buffer.from('second'));
    expect([first.toString(), acc.take().toString()]).toEqual(['first', 'second']);
  });
});
