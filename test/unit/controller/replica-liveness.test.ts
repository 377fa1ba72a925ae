import { describe, expect, it } from 'vitest';
import { EMPTY_VIEW, aliveCount, failedList, judge, nextView, replicaLeaseName, type LivenessView } from '../../../src/controller/replica-liveness.js';

const D = 30_000;
type Step = { listed: Record<string, string>; sent: number } | 'failed';

/** The view after a series of lists (each answered 100 ms after it was sent), lists every 10 s unless said. */
function after(steps: Step[], maxGapMs = 25_000): LivenessView {
  let view = EMPTY_VIEW;
  for (const step of steps) {
    if (step === 'failed') view = failedList(view);
    else
      view = nextView(
        view,
        Object.entries(step.listed).map(([identity, resourceVersion]) => ({ identity, resourceVersion })),
        step.sent,
        step.sent + 100,
        maxGapMs,
      );
  }
  return view;
}
const list = (sent: number, listed: Record<string, string>): Step => ({ sent, listed });

describe('replica liveness, judged from this process’s own lists', () => {
  it.each<[string, Step[], 'alive' | 'gone' | 'unknown']>([
    ['never listed', [], 'unknown'],
    ['never seen (an older version, or stopped before this process started)', [list(0, { b: '1' })], 'unknown'],
    ['seen once', [list(0, { a: '1' })], 'alive'],
    [
      'renewed every 10 s',
      [list(0, { a: '1' }), list(10_000, { a: '2' }), list(20_000, { a: '3' }), list(30_000, { a: '4' }), list(40_000, { a: '5' })],
      'alive',
    ],
    ['unchanged for less than a lease duration', [list(0, { a: '1' }), list(10_000, { a: '1' }), list(20_000, { a: '1' }), list(30_000, { a: '1' })], 'alive'],
    [
      'unchanged for a lease duration',
      [list(0, { a: '1' }), list(10_000, { a: '1' }), list(20_000, { a: '1' }), list(30_000, { a: '1' }), list(40_000, { a: '1' })],
      'gone',
    ],
    [
      'renewed again after it looked gone (a partition healed)',
      [list(0, { a: '1' }), list(20_000, { a: '1' }), list(40_000, { a: '1' }), list(50_000, { a: '2' })],
      'alive',
    ],
    ['its Lease deleted (a clean shutdown)', [list(0, { a: '1' }), list(10_000, {})], 'gone'],
    ['its Lease deleted, then others listed', [list(0, { a: '1' }), list(10_000, {}), list(20_000, { b: '1' })], 'gone'],
    // Only time this process could see the API counts.
    [
      'unchanged across an outage of this process’s lists',
      [list(0, { a: '1' }), 'failed', 'failed', 'failed', list(40_000, { a: '1' }), list(50_000, { a: '1' })],
      'alive',
    ],
    [
      'unchanged for a lease duration after the outage',
      [list(0, { a: '1' }), 'failed', list(40_000, { a: '1' }), list(50_000, { a: '1' }), list(60_000, { a: '1' }), list(70_000, { a: '1' })],
      'gone',
    ],
    ['a failed list, then nothing yet', [list(0, { a: '1' }), list(30_000, { a: '1' }), 'failed'], 'unknown'],
    // This process stalled between two lists: the gap proves nothing about the other replica.
    ['unchanged across a stall of this process', [list(0, { a: '1' }), list(40_000, { a: '1' })], 'alive'],
    [
      'unchanged across a stall and a lease duration after it',
      [list(0, { a: '1' }), list(40_000, { a: '1' }), list(55_000, { a: '1' }), list(70_000, { a: '1' })],
      'gone',
    ],
  ])('%s → %s', (_what, steps, expected) => {
    expect(judge(after(steps), 'a', D)).toBe(expected);
  });

  it('keeps a version’s first sighting while it stays the same, and takes a new one at the answer', () => {
    const v = after([list(0, { a: '1', b: '7' }), list(10_000, { a: '1', b: '8' })]);
    expect(v.leases.get('a')).toEqual({ resourceVersion: '1', firstSeenMs: 100 });
    expect(v.leases.get('b')).toEqual({ resourceVersion: '8', firstSeenMs: 10_100 });
  });

  it('forgets a deleted identity once its Lease is back (a replica never reuses one, but a view must not lie)', () => {
    expect(judge(after([list(0, { a: '1' }), list(10_000, {}), list(20_000, { a: '9' })]), 'a', D)).toBe('alive');
  });

  it('remembers at most 1000 deleted replicas, forgetting the oldest', () => {
    const many = Object.fromEntries(Array.from({ length: 1001 }, (_, i) => [`r${i}`, '1']));
    const v = after([list(0, many), list(10_000, {})]);
    expect(v.deleted.size).toBe(1000);
    expect(judge(v, 'r0', D)).toBe('unknown');
    expect(judge(v, 'r1000', D)).toBe('gone');
  });

  // `self` is 's': the count an operator reads on this replica's codemode_gateway_replicas.
  it.each<[string, Step[], number]>([
    ['before any list: itself', [], 1],
    ['its own Lease listed', [list(0, { s: '1' })], 1],
    ['its own Lease not yet listed, another renewing', [list(0, { a: '1' })], 2],
    ['two others renewing', [list(0, { s: '1', a: '1', b: '1' }), list(10_000, { s: '2', a: '2', b: '2' })], 3],
    ['one other released its Lease', [list(0, { s: '1', a: '1' }), list(10_000, { s: '2' })], 1],
    [
      'one other unrenewed for a lease duration',
      [
        list(0, { s: '1', a: '1', b: '1' }),
        list(10_000, { s: '2', a: '1', b: '2' }),
        list(20_000, { s: '3', a: '1', b: '3' }),
        list(30_000, { s: '4', a: '1', b: '4' }),
        list(40_000, { s: '5', a: '1', b: '5' }),
      ],
      2,
    ],
    ['while its own lists fail: only itself is known', [list(0, { s: '1', a: '1' }), 'failed'], 1],
  ])('counts alive replicas: %s', (_what, steps, expected) => {
    expect(aliveCount(after(steps), 's', D)).toBe(expected);
  });

  it.each([['host-1-abcd1234'], ['a'.repeat(40) + '-ffffffff'], ['UPPER_case.dots']])('names the Lease of %s as a DNS-1123 name', (identity) => {
    const name = replicaLeaseName(identity);
    expect(name).toMatch(/^codemode-replica-[0-9a-f]{16}$/);
    expect(replicaLeaseName(identity)).toBe(name);
  });
});
