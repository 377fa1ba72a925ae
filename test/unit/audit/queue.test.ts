// AuditQueue's bookkeeping, driven directly (no writer, no timers): whose call is evicted or refused
// when the shared queue is full, what is shed after a failed write puts its calls back, how a due
// batch is taken, and the invariants every step keeps.
import { describe, expect, it } from 'vitest';
import { AuditQueue, type QueueDrop } from '../../../src/audit/queue.js';
import type { AuditEntry } from '../../../src/audit/record.js';
import { finishedCall } from './entries.js';

/** 'alice s1 a0': a call named a0 of alice's session s1. */
const call = (spec: string): AuditEntry => {
  const [user, session, name] = spec.split(' ') as [string, string, string];
  return finishedCall(user, session, name);
};

/** A queue of `capacity` and the drops it reported, in order. */
function queueOf(capacity: number): { q: AuditQueue; drops: QueueDrop[] } {
  const drops: QueueDrop[] = [];
  return { q: new AuditQueue(capacity, (why) => drops.push(why)), drops };
}

/** The queued calls' names, by session in queue order, oldest first. */
const names = (q: AuditQueue): string[] => [...q.sessions.values()].flatMap((p) => p.entries.map((e) => e.entry.name));

/** length is the sum of the queued calls, no session is empty, and each user's count is the sum of its sessions'. */
function expectConsistent(q: AuditQueue): void {
  const sessions = [...q.sessions.values()];
  expect(q.length).toBe(sessions.reduce((n, p) => n + p.entries.length, 0));
  for (const p of sessions) expect(p.entries.length).toBeGreaterThan(0);
  const byUser = new Map<string, number>();
  for (const p of sessions) byUser.set(p.user, (byUser.get(p.user) ?? 0) + p.entries.length);
  expect(q.holders()).toEqual(byUser);
}

/** Adds each call at `now` 0, checking the invariants after each; whether each was admitted. */
function addAll(q: AuditQueue, calls: string[]): boolean[] {
  return calls.map((c) => {
    const admitted = q.add(call(c), 0);
    expectConsistent(q);
    return admitted;
  });
}

describe('AuditQueue.add: whose call goes when the queue is full', () => {
  it.each<[string, number, string[], boolean[], string[], QueueDrop[]]>([
    ['not full: every call is queued', 3, ['alice s1 a0', 'bob s2 b0', 'alice s1 a1'], [true, true, true], ['a0', 'a1', 'b0'], []],
    ['full: the largest holder’s own call is refused', 2, ['alice s1 a0', 'alice s1 a1', 'alice s1 a2'], [true, true, false], ['a0', 'a1'], []],
    [
      'full: a smaller holder’s call takes the place of the largest holder’s newest, over all its sessions',
      3,
      ['alice s1 a0', 'alice s2 a1', 'alice s1 a2', 'bob s3 b0'],
      [true, true, true, true],
      ['a0', 'a1', 'b0'],
      ['evicted'],
    ],
    [
      'the newest is by queue order, not by session: a2 of s2 went after a1 of s1',
      3,
      ['alice s1 a0', 'alice s2 a1', 'alice s2 a2', 'bob s3 b0'],
      [true, true, true, true],
      ['a0', 'a1', 'b0'],
      ['evicted'],
    ],
    ['a call of a user tied with the largest holder is refused', 2, ['alice s1 a0', 'bob s2 b0', 'bob s2 b1'], [true, true, false], ['a0', 'b0'], []],
    [
      'of tied largest holders, the one queued most recently loses its newest',
      2,
      ['alice s1 a0', 'bob s2 b0', 'carol s3 c0'],
      [true, true, true],
      ['a0', 'c0'],
      ['evicted'],
    ],
    [
      'the writer’s table: alice fills it, then bob and carol take her place until they hold the most',
      4,
      ['alice s1 a0', 'alice s2 a1', 'alice s1 a2', 'alice s2 a3', 'alice s1 a4', 'bob s3 b0', 'carol s4 c0', 'bob s3 b1', 'bob s3 b2', 'carol s4 c1'],
      [true, true, true, true, false, true, true, true, false, true],
      ['a0', 'b0', 'c0', 'c1'],
      ['evicted', 'evicted', 'evicted', 'evicted'],
    ],
    ['a call without an owner counts for the user ""', 2, ['alice s1 a0', 'alice s1 a1', ' s2 x0'], [true, true, true], ['a0', 'x0'], ['evicted']],
  ])('%s', (_what, capacity, calls, admitted, queued, drops) => {
    const h = queueOf(capacity);
    expect(addAll(h.q, calls)).toEqual(admitted);
    expect(names(h.q).sort()).toEqual(queued);
    expect(h.drops).toEqual(drops);
    expect(h.q.length).toBeLessThanOrEqual(capacity);
  });

  it('a session whose last call was evicted is gone, and so is a user holding none', () => {
    const h = queueOf(2);
    addAll(h.q, ['alice s1 a0', 'alice s2 a1', 'bob s3 b0']);
    expect([...h.q.sessions.keys()]).toEqual(['n/s1/alice', 'n/s3/bob']);
    addAll(h.q, ['carol s4 c0']);
    expect([...h.q.sessions.keys()]).toEqual(['n/s1/alice', 'n/s4/carol']);
    expect(h.q.holders()).toEqual(
      new Map([
        ['alice', 1],
        ['carol', 1],
      ]),
    );
  });
});

describe('AuditQueue.putBack and shed: a failed write’s calls come back first in their session’s line', () => {
  // `first` is queued and taken (the write that fails), `meanwhile` queued while it is written, then it is put back and shed.
  it.each<[string, number, string[], string[], string[], QueueDrop[]]>([
    ['within the bound: nothing is shed', 4, ['bob s1 b0'], ['alice s2 a0', 'alice s2 a1'], ['a0', 'a1', 'b0'], []],
    [
      'over the bound: the largest holder’s newest goes',
      4,
      ['bob s1 b0'],
      ['alice s2 a0', 'alice s2 a1', 'alice s2 a2', 'alice s2 a3'],
      ['a0', 'a1', 'a2', 'b0'],
      ['shed'],
    ],
    [
      'ahead of its session’s later calls; then the largest holders’ newest go, one at a time',
      3,
      ['bob s1 b0', 'bob s1 b1'],
      ['bob s1 b2', 'alice s2 a0', 'alice s2 a1'],
      ['a0', 'b0', 'b1'],
      ['shed', 'shed'],
    ],
    [
      'the put-back calls themselves when their user holds the most',
      3,
      ['bob s1 b0', 'bob s1 b1', 'bob s1 b2'],
      ['alice s2 a0', 'alice s2 a1'],
      ['a0', 'a1', 'b0'],
      ['shed', 'shed'],
    ],
    [
      'tied: the user queued again most recently (the put-back one) loses its newest first',
      2,
      ['bob s1 b0', 'bob s1 b1'],
      ['alice s2 a0', 'alice s2 a1'],
      ['a0', 'b0'],
      ['shed', 'shed'],
    ],
  ])('%s', (_what, capacity, first, meanwhile, queued, drops) => {
    const h = queueOf(capacity);
    addAll(h.q, first);
    const taken = h.q.takeDue(new Set(), 10, 1000, 100, true);
    if (!taken || !('key' in taken)) throw new Error('nothing taken');
    expect(taken.entries.map((e) => e.entry.name)).toEqual(first.map((c) => c.split(' ')[2]));
    addAll(h.q, meanwhile);
    h.q.putBack(taken.key, taken.entries);
    expectConsistent(h.q);
    expect(h.q.sessions.get(taken.key)?.since ?? 0).toBe(0);
    h.q.shed();
    expectConsistent(h.q);
    expect(names(h.q)).toEqual(queued);
    expect(h.drops).toEqual(drops);
    expect(h.q.length).toBeLessThanOrEqual(capacity);
  });

  it('puts back nothing when every call of the batch was dropped', () => {
    const h = queueOf(2);
    addAll(h.q, ['bob s1 b0']);
    h.q.putBack('n/s1/bob', []);
    expect(names(h.q)).toEqual(['b0']);
    expectConsistent(h.q);
  });
});

describe('AuditQueue.takeDue: the calls of the first due session', () => {
  type Shown = { take: string; names: string[] } | { wakeAt: number } | undefined;
  // alice's s1 holds three calls queued at 0, bob's s2 one queued at 800; linger 1000 ms.
  it.each<[string, string[], number, boolean, number, Shown, string[]]>([
    ['nothing due yet: when the oldest is', [], 500, false, 4, { wakeAt: 1000 }, ['a0', 'a1', 'a2', 'b0']],
    ['the oldest waited the linger: all its calls', [], 1000, false, 4, { take: 'n/s1/alice', names: ['a0', 'a1', 'a2'] }, ['b0']],
    [
      'more than a record’s worth: one record now, the rest queued anew behind the others',
      [],
      500,
      false,
      2,
      { take: 'n/s1/alice', names: ['a0', 'a1'] },
      ['b0', 'a2'],
    ],
    ['one being written waits, and the next is not due yet', ['n/s1/alice'], 1000, false, 4, { wakeAt: 1800 }, ['a0', 'a1', 'a2', 'b0']],
    ['one being written waits, the next is taken when due', ['n/s1/alice'], 1800, false, 4, { take: 'n/s2/bob', names: ['b0'] }, ['a0', 'a1', 'a2']],
    ['stopping takes what lingers', ['n/s1/alice'], 0, true, 4, { take: 'n/s2/bob', names: ['b0'] }, ['a0', 'a1', 'a2']],
    ['only sessions being written: nothing to wait for', ['n/s1/alice', 'n/s2/bob'], 5000, false, 4, undefined, ['a0', 'a1', 'a2', 'b0']],
  ])('%s', (_what, writing, now, flushing, max, expected, left) => {
    const h = queueOf(10);
    for (const c of ['alice s1 a0', 'alice s1 a1', 'alice s1 a2']) h.q.add(call(c), 0);
    h.q.add(call('bob s2 b0'), 800);
    const got = h.q.takeDue(new Set(writing), now, 1000, max, flushing);
    const shown: Shown = got && 'key' in got ? { take: got.key, names: got.entries.map((e) => e.entry.name) } : got;
    expect(shown).toEqual(expected);
    expect(names(h.q)).toEqual(left);
    expectConsistent(h.q);
    // What was left of a taken session waits from now.
    if (got && 'key' in got && h.q.sessions.has(got.key)) expect(h.q.sessions.get(got.key)?.since).toBe(now);
  });

  it('clear empties it and says how many calls it held, reporting no drops', () => {
    const h = queueOf(3);
    addAll(h.q, ['alice s1 a0', 'bob s2 b0']);
    expect(h.q.clear()).toBe(2);
    expect(h.q.length).toBe(0);
    expect(h.q.holders()).toEqual(new Map());
    expect(h.drops).toEqual([]);
  });
});

describe("a user's owner, held once", () => {
  // An owner may carry 64 groups of 256 characters (~16 KiB): each queued call holding its own
  // copy made the queue's bound (capacity × an entry) many times what the README states.
  const groups = (tag: string): string[] => Array.from({ length: 64 }, (_, i) => `${tag}-${i}`.padEnd(256, 'g'));
  const owned = (spec: string, g: string[]): AuditEntry => ({ ...call(spec), owner: { user: spec.split(' ')[0] as string, groups: [...g] } });
  const owners = (q: AuditQueue): Set<unknown> => new Set([...q.sessions.values()].flatMap((p) => p.entries.map((e) => e.entry.owner)));

  it.each<[string, Array<[string, string]>, number]>([
    [
      'calls of one session',
      [
        ['alice s1 a0', 'x'],
        ['alice s1 a1', 'x'],
        ['alice s1 a2', 'x'],
      ],
      1,
    ],
    [
      'calls of two sessions of one user',
      [
        ['alice s1 a0', 'x'],
        ['alice s2 a1', 'x'],
      ],
      1,
    ],
    [
      'two users',
      [
        ['alice s1 a0', 'x'],
        ['bob s2 b0', 'x'],
        ['alice s1 a1', 'x'],
      ],
      2,
    ],
    [
      'one user whose groups changed',
      [
        ['alice s1 a0', 'x'],
        ['alice s1 a1', 'y'],
        ['alice s1 a2', 'y'],
      ],
      2,
    ],
  ])('%s: as many owner objects in the queue as distinct owners', (_what, calls, expected) => {
    const h = queueOf(10);
    for (const [spec, tag] of calls) h.q.add(owned(spec, groups(tag)), 0);
    expectConsistent(h.q);
    expect(owners(h.q).size).toBe(expected);
    // Each call still carries its own owner's value.
    for (const p of h.q.sessions.values()) for (const e of p.entries) expect(e.entry.owner?.user).toBe(p.user);
  });
});
