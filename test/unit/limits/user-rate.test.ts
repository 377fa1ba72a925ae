// A rate per user (src/limits/user-rate.ts): a burst, then a steady rate, per user; e.g. the API
// reads one user's lookups of sessions the cache does not show may cause.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { UserRate } from '../../../src/limits/user-rate.js';

const LIMITS = { burst: 5, perSecond: 2 };

/** How many of `n` takes by `user`, made `everyMs` apart, were allowed. */
function allowed(reads: UserRate, user: string, n: number, everyMs = 0): number {
  let ok = 0;
  for (let i = 0; i < n; i++) {
    if (reads.take(user)) ok++;
    vi.advanceTimersByTime(everyMs);
  }
  return ok;
}

describe('UserRate', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['performance', 'Date', 'setTimeout'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it.each([
    ['back to back: the burst only', 20, 0, 5],
    ['one every 100 ms for 2 s: the burst, then 2 a second', 20, 100, 5 + 3],
    ['one every 500 ms: every one (the rate is 2 a second)', 10, 500, 10],
  ])('%s', (_name, n, everyMs, expected) => {
    expect(allowed(new UserRate(LIMITS), 'alice', n, everyMs)).toBe(expected);
  });

  it("gives each user their own share: one user's flood leaves another's reads", () => {
    const reads = new UserRate(LIMITS);
    expect(allowed(reads, 'mallory', 100)).toBe(5);
    expect(allowed(reads, 'alice', 5)).toBe(5);
    expect(allowed(reads, '', 5)).toBe(5);
  });

  it('lets go of idle users when many have come, and keeps the ones still refused', () => {
    const reads = new UserRate(LIMITS);
    allowed(reads, 'mallory', 10);
    for (let i = 0; i < 999; i++) reads.take(`user-${i}`);
    expect(reads.size).toBe(1000);
    vi.advanceTimersByTime(1_000);
    reads.take('newcomer');
    // After 1 s the 999 users (4 of 5 left, 2 a second back) are full again; mallory (0 left) is not.
    expect(reads.size).toBe(2);
    expect(reads.take('mallory')).toBe(true);
    expect(reads.take('mallory')).toBe(true);
    expect(reads.take('mallory')).toBe(false);
  });
});
