import { describe, expect, it } from 'vitest';
import { RecentKeys } from '../../../src/controller/recent.js';

describe('RecentKeys', () => {
  it('remembers a key for its time to live, then forgets it', () => {
    let now = 1000;
    const r = new RecentKeys(500, () => now);
    r.add('a');
    expect(r.has('a')).toBe(true);
    expect(r.has('b')).toBe(false);
    now = 1499;
    expect(r.has('a')).toBe(true);
    now = 1500;
    expect(r.has('a')).toBe(false);
  });

  it('drops expired keys when adding, so memory stays bounded by the rate times the TTL', () => {
    let now = 0;
    const r = new RecentKeys(100, () => now);
    for (let i = 0; i < 1000; i++) {
      now = i;
      r.add(`k${i}`);
    }
    expect(r.size).toBe(100);
    expect(r.has('k899')).toBe(false);
    expect(r.has('k900')).toBe(true);
  });

  it('re-adding a key renews it', () => {
    let now = 0;
    const r = new RecentKeys(100, () => now);
    r.add('a');
    now = 90;
    r.add('b');
    now = 95;
    r.add('a');
    now = 150;
    expect(r.has('a')).toBe(true);
    expect(r.has('b')).toBe(true);
    now = 192;
    expect(r.has('b')).toBe(false);
    expect(r.has('a')).toBe(true);
  });
});
