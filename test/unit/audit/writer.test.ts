// The writer while the API server cannot be reached: a real client pointed at a closed port (no
// fake API). record() must return at once, never throw, hold at most its capacity, and count what
// it drops.
import { createServer } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { ANNOTATION_EXECUTOR, AUDIT_EXECUTOR } from '../../../src/api/v1alpha1/labels.js';
import { atRecordCap, liveRecords } from '../../../src/audit/live-records.js';
import { HELD_RECHECK_MS } from '../../../src/audit/queue.js';
import { AuditWriter, chooseDue, type AuditResult, type DueChoice } from '../../../src/audit/writer.js';
import { makeClients } from '../../../src/kube/clients.js';
import { finishedCall } from './entries.js';

async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

const entry = (i: number) => finishedCall('alice', 's', `run-${i}`);

describe('AuditWriter with the API server unreachable', () => {
  it('queues up to its capacity, drops and counts the rest, never throws, and drops what is left on stop', async () => {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: `http://127.0.0.1:${await closedPort()}`, skipTLSVerify: true }],
      users: [{ name: 'u' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    const results: AuditResult[] = [];
    const lines: string[] = [];
    const log = pino({ level: 'warn' }, { write: (l: string) => void lines.push(l) });
    const writer = new AuditWriter(makeClients(kc), { capacity: 5, concurrency: 2, onResult: (r) => results.push(r) }, log);
    const accepted = Array.from({ length: 20 }, (_, i) => writer.record(entry(i)));
    // At most capacity waiting, plus the writes already in flight when the queue filled.
    expect(accepted.filter(Boolean).length).toBeLessThanOrEqual(7);
    expect(results.filter((r) => r === 'dropped').length).toBeGreaterThanOrEqual(13);
    await new Promise((r) => setTimeout(r, 300));
    expect(writer.length).toBeLessThanOrEqual(5);
    await writer.stop(100);
    expect(writer.length).toBe(0);
    // A write still in flight at stop is dropped when it fails.
    for (let i = 0; i < 100 && results.length < 20; i++) await new Promise((r) => setTimeout(r, 50));
    expect(results).not.toContain('written');
    expect(results).toHaveLength(20);
    expect(writer.record(entry(99))).toBe(false);
    // Logged with counts only: never the code.
    expect(lines.join('')).toContain('Dropped audit records of session calls');
    expect(lines.join('')).not.toContain('secret');
  });
});

describe('chooseDue (which session to write now, or when to look again)', () => {
  const p = (size: number, since: number) => ({ entries: Array<number>(size).fill(0), since });
  // linger 1000 ms, 3 calls a record, now = 5000.
  it.each<[string, Array<[string, { entries: number[]; since: number }]>, string[], boolean, DueChoice]>([
    ['nothing queued', [], [], false, undefined],
    ['a call younger than the linger waits for it', [['a', p(1, 4500)]], [], false, { wakeAt: 5500 }],
    ['a call that waited the linger is written', [['a', p(1, 4000)]], [], false, { take: 'a' }],
    ['a record’s worth is written at once', [['a', p(3, 4999)]], [], false, { take: 'a' }],
    ['stopping writes what lingers', [['a', p(1, 4999)]], [], true, { take: 'a' }],
    ['a retried record (since 0) is due at once', [['a', p(2, 0)]], [], false, { take: 'a' }],
    [
      'a session whose record is being written waits, the next due one goes',
      [
        ['a', p(5, 0)],
        ['b', p(1, 3000)],
      ],
      ['a'],
      false,
      { take: 'b' },
    ],
    ['only a session being written: nothing to wait for', [['a', p(5, 0)]], ['a'], false, undefined],
    [
      'first due in queue order, though a later one is fuller',
      [
        ['a', p(1, 3000)],
        ['b', p(3, 4999)],
      ],
      [],
      false,
      { take: 'a' },
    ],
    [
      'of two young sessions, the soonest wakes',
      [
        ['a', p(1, 4800)],
        ['b', p(2, 4600)],
      ],
      [],
      false,
      { wakeAt: 5600 },
    ],
  ])('%s', (_n, pending, writing, flushing, expected) => {
    expect(chooseDue(new Map(pending), new Set(writing), 5000, 1000, 3, flushing)).toEqual(expected);
  });

  // A user at their cap of live records (held): their due calls wait and gather, looked at again
  // in HELD_RECHECK_MS; other users' go.
  const u = (user: string, size: number, since: number) => ({ user, entries: Array<number>(size).fill(0), since });
  it.each<[string, Array<[string, { user: string; entries: number[]; since: number }]>, string[], boolean, DueChoice]>([
    ['a held user’s due session waits, looked at again soon', [['a', u('alice', 1, 4000)]], ['alice'], false, { wakeAt: 5000 + HELD_RECHECK_MS }],
    ['a held user’s full record waits too', [['a', u('alice', 3, 4999)]], ['alice'], false, { wakeAt: 5000 + HELD_RECHECK_MS }],
    ['and when the writer is stopping', [['a', u('alice', 1, 4999)]], ['alice'], true, { wakeAt: 5000 + HELD_RECHECK_MS }],
    [
      'another user’s due session goes before it',
      [
        ['a', u('alice', 3, 0)],
        ['b', u('bob', 1, 3000)],
      ],
      ['alice'],
      false,
      { take: 'b' },
    ],
    [
      'a young session wakes before the recheck when it is due first',
      [
        ['a', u('alice', 1, 0)],
        ['b', u('bob', 1, 4200)],
      ],
      ['alice'],
      false,
      { wakeAt: 5200 },
    ],
    ['a session not yet due is not looked at for its user', [['a', u('alice', 1, 4500)]], ['alice'], false, { wakeAt: 5500 }],
    ['a user not held goes', [['a', u('bob', 1, 4000)]], ['alice'], false, { take: 'a' }],
  ])('%s', (_n, pending, heldUsers, flushing, expected) => {
    const asked: string[] = [];
    const held = (user: string): boolean => {
      asked.push(user);
      return heldUsers.includes(user);
    };
    expect(chooseDue(new Map(pending), new Set(), 5000, 1000, 3, flushing, held)).toEqual(expected);
    // Only due sessions' users are looked up (a count of the cache each time).
    expect(asked.length).toBeLessThanOrEqual(pending.length);
  });
});

describe('liveRecords and atRecordCap', () => {
  const run = (name: string, opts: { audit?: boolean; user?: string; deleting?: boolean } = {}) => ({
    metadata: {
      name,
      ...(opts.audit !== false && { annotations: { [ANNOTATION_EXECUTOR]: AUDIT_EXECUTOR } }),
      ...(opts.deleting && { deletionTimestamp: new Date() }),
    },
    spec: { ...(opts.user !== undefined && { owner: { user: opts.user } }) },
  });
  it.each([
    ['no runs', [], { total: 0, byUser: new Map() }],
    [
      'records by the user their spec names',
      [run('a', { user: 'alice' }), run('b', { user: 'alice' }), run('c', { user: 'bob' })],
      {
        total: 3,
        byUser: new Map([
          ['alice', 2],
          ['bob', 1],
        ]),
      },
    ],
    ['a record without an owner is the anonymous user’s', [run('a')], { total: 1, byUser: new Map([['', 1]]) }],
    ['runs that are not records do not count', [run('a', { audit: false, user: 'alice' })], { total: 0, byUser: new Map() }],
    ['records being deleted do not count', [run('a', { user: 'alice', deleting: true })], { total: 0, byUser: new Map() }],
  ])('%s', (_n, runs, expected) => {
    expect(liveRecords(runs)).toEqual(expected);
  });

  const live = {
    total: 5,
    byUser: new Map([
      ['alice', 4],
      ['bob', 1],
    ]),
  };
  it.each([
    ['a user under both caps', { total: 10, perUser: 5 }, 'alice', false],
    ['a user at their own cap', { total: 10, perUser: 4 }, 'alice', true],
    ['another user under it', { total: 10, perUser: 4 }, 'bob', false],
    ['a user with none yet', { total: 10, perUser: 4 }, 'carol', false],
    ['everyone at the total cap', { total: 5, perUser: 100 }, 'carol', true],
  ])('%s', (_n, caps, user, held) => {
    expect(atRecordCap(live, caps, user)).toBe(held);
  });
});
