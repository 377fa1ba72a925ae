import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { untilOpened } from '../../../src/exec/open-wait.js';

class Refused extends Error {}
class Broken extends Error {}

/** An opener that fails with each of `failures` in turn (after `took` ms each), then opens. */
function opener(failures: Array<'refused' | 'broken'>, took = 10): { open: () => Promise<string>; attempts: () => number } {
  let n = 0;
  return {
    attempts: () => n,
    open: async () => {
      const f = failures[n++];
      await new Promise((r) => setTimeout(r, took));
      if (f === 'refused') throw new Refused('refused');
      if (f === 'broken') throw new Broken('broken');
      return 'open';
    },
  };
}

describe('untilOpened', () => {
  beforeEach(() => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date', 'performance'] }));
  afterEach(() => vi.useRealTimers());

  const retryable = (err: unknown): boolean => err instanceof Refused;

  it.each([
    ['opens at once', [], 30_000, 10, 'open', 1],
    ['waits out refusals', ['refused', 'refused', 'refused'], 30_000, 10, 'open', 4],
    ['gives up after maxMs (0, 1, 3, 7 s and a last one at 8 s)', Array<'refused'>(50).fill('refused'), 8_000, 10, Refused, 5],
    ['does not wait out another failure', ['broken'], 30_000, 10, Broken, 1],
    ['does not wait out a failure that took seconds (a hung kernel)', ['refused'], 30_000, 6_000, Refused, 1],
    ['tries once when no time is left', ['refused'], 0, 10, Refused, 1],
  ] as const)('%s', async (_name, failures, maxMs, took, outcome, attempts) => {
    const o = opener([...failures], took);
    const result = untilOpened(o.open, { maxMs, retryable }).then(
      (v) => v,
      (err: unknown) => err,
    );
    await vi.advanceTimersByTimeAsync(120_000);
    const r = await result;
    if (outcome === 'open') expect(r).toBe('open');
    else expect(r).toBeInstanceOf(outcome);
    expect(o.attempts()).toBe(attempts);
  });
});
