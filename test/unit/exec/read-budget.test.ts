// A pod's reading budget (src/exec/read-budget.ts): charged after the fact, into debt, repaid at
// its rate; the pause it asks for is the time the debt takes to repay. A user's budget is charged
// by all the user's pods, so many pods of one user pause each other, not other users' pods.
import { describe, expect, it } from 'vitest';
import { READ_BURST_MS, READ_MS_PER_MESSAGE, READ_MS_PER_SECOND, ReadBudget, ReadBudgets, readingUser } from '../../../src/exec/read-budget.js';

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

/** `user/pod` charges `ms` at `after` ms since the last step; `-` for a pod with no user known yet. */
type Step = [after: number, pod: string, ms: number];

/** The pause each step asked for, and which budget it repays. */
function sharedPauses(steps: Step[]): string[] {
  let t = 0;
  const budgets = new ReadBudgets(() => t);
  const live = (): boolean => true;
  return steps.map(([after, key, ms]) => {
    t += after;
    const [user, pod] = key.split('/') as [string, string];
    if (user !== '-') budgets.chargeTo(pod, user, live);
    const { pauseMs, budget } = budgets.pod(pod, live).charge(ms);
    return pauseMs === 0 ? '-' : `${String(pauseMs)} ${budget}`;
  });
}

describe('ReadBudgets: per pod, and per user across its pods', () => {
  it.each<[string, Step[], string[]]>([
    [
      "one user's three pods, each inside its own burst, past the user's together: the third waits for the user",
      [
        [0, 'alice/a', 200],
        [0, 'alice/b', 200],
        [0, 'alice/c', 200],
      ],
      ['-', '-', '1000 user'],
    ],
    [
      "another user's pod is not paused for alice's debt",
      [
        [0, 'alice/a', 200],
        [0, 'alice/b', 200],
        [0, 'alice/c', 200],
        [0, 'bob/d', 200],
      ],
      ['-', '-', '1000 user', '-'],
    ],
    ['a pod whose own debt is the larger repays its own', [[0, 'alice/a', 600]], ['7000 pod']],
    [
      'a pod with no user yet (a pool pod before its claim) charges no user',
      [
        [0, '-/a', 200],
        [0, '-/b', 200],
        [0, '-/c', 200],
      ],
      ['-', '-', '-'],
    ],
    [
      'owners of no name (objects without spec.owner) share one budget',
      [
        [0, '/a', 200],
        [0, '/b', 200],
        [0, '/c', 200],
      ],
      ['-', '-', '1000 user'],
    ],
    [
      "the user's budget refills at 100 ms a second across its pods",
      [
        [0, 'alice/a', 250],
        [0, 'alice/b', 250],
        [1000, 'alice/c', 100],
        [0, 'alice/a', 1],
      ],
      ['-', '-', '-', '10 user'],
    ],
  ])('%s', (_, steps, expected) => {
    expect(sharedPauses(steps)).toEqual(expected);
  });

  it('forgets full budgets of pods without a stream and of users none of its pods charge', () => {
    let t = 0;
    const budgets = new ReadBudgets(() => t);
    const open = new Set(['ns/a', 'ns/b']);
    const live = (k: string): boolean => open.has(k);
    budgets.chargeTo('ns/a', 'alice', live);
    budgets.chargeTo('ns/b', 'bob', live);
    budgets.pod('ns/a', live).charge(100);
    budgets.pod('ns/b', live).charge(100);
    open.clear();
    t += 1000; // a's and b's pods are full again after 2 s, alice's and bob's users after 1 s
    budgets.chargeTo('ns/c', 'carol', live);
    budgets.pod('ns/c', live).charge(100);
    expect(budgets.size).toEqual({ pods: 3, users: 3 });
    t += 1000;
    // Sweeps the full pods a and b, then alice and bob, whom no kept pod charges; c still owes.
    budgets.chargeTo('ns/d', 'dave', live);
    expect(budgets.size).toEqual({ pods: 2, users: 2 });
  });

  it.each<[{ user: string } | undefined, string]>([
    [{ user: 'alice' }, 'alice'],
    [undefined, ''],
  ])("a pod's reading is charged to its owner %j as %j", (owner, user) => {
    expect(readingUser(owner)).toBe(user);
  });
});
