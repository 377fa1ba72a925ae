// A pod's reading budget (src/exec/read-budget.ts): charged after the fact, into debt, repaid at
// its rate; the pause it asks for is the time the debt takes to repay.
import { describe, expect, it } from 'vitest';
import { READ_BURST_MS, READ_MS_PER_MESSAGE, READ_MS_PER_SECOND, ReadBudget } from '../../../src/exec/read-budget.js';

/** Charges `steps` ([ms since the last step, ms charged]) and returns the pause each asked for. */
function pauses(steps: [number, number][]): number[] {
  let t = 0;
  const b = new ReadBudget(READ_BURST_MS, READ_MS_PER_SECOND, () => t);
  return steps.map(([after, ms]) => {
    t += after;
    return b.charge(ms);
  });
}

describe('ReadBudget', () => {
  it.each<[string, [number, number][], number[]]>([
    ['the burst in one chunk', [[0, READ_BURST_MS]], [0]],
    ['just past the burst: a pause that repays 1 ms', [[0, READ_BURST_MS + 1]], [20]],
    ['a parse of 600 ms at once: 350 ms owed, 7 s at 50 ms a second', [[0, 600]], [7000]],
    ['an honest stream: 15 ms a second for a minute', Array.from({ length: 60 }, (): [number, number] => [1000, 15]), Array.from({ length: 60 }, () => 0)],
    [
      'the debt repaid exactly by the end of the pause it asked for, nothing more',
      [
        [0, 300],
        [1000, 0],
        [0, 1],
      ],
      [1000, 0, 20],
    ],
    [
      'refilled no further than the burst',
      [
        [0, 0],
        [60_000, 260],
      ],
      [0, 200],
    ],
    [
      'a negative charge counts as none',
      [
        [0, -100],
        [0, READ_BURST_MS],
      ],
      [0, 0],
    ],
  ])('%s', (_, steps, expected) => {
    expect(pauses(steps)).toEqual(expected);
  });

  it.each<[string, number, number, boolean]>([
    ['100,000 one-byte messages in a second (what the pieces rule lets a trickled frame use) are paused', 100_000, 1, true],
    ['1,000 messages a second for ten seconds (far more than a kernel writes frames) are not', 1_000, 10, false],
  ])('%s', (_, perSecond, seconds, paused) => {
    const gapMs = 1000 / perSecond;
    const steps = Array.from({ length: perSecond * seconds }, (_, i): [number, number] => [i === 0 ? 0 : gapMs, READ_MS_PER_MESSAGE]);
    expect(pauses(steps).some((p) => p > 0)).toBe(paused);
  });

  it('is full when nothing is owed or spent, so it can be forgotten', () => {
    let t = 0;
    const b = new ReadBudget(READ_BURST_MS, READ_MS_PER_SECOND, () => t);
    expect(b.full).toBe(true);
    b.charge(100);
    expect(b.full).toBe(false);
    t += 1999;
    expect(b.full).toBe(false);
    t += 1;
    expect(b.full).toBe(true);
  });
});
