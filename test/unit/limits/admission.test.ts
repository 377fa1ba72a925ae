// Run and session admission: the pure decisions as tables, then the semaphore + FIFO queue.
import type { V1Pod } from '@kubernetes/client-node';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  AdmissionError,
  RunAdmission,
  decideRun,
  describeRunLoad,
  fullLimit,
  retryAfterSeconds,
  runRefusal,
  sessionCapacity,
  sessionRefusal,
  type RunCaps,
  type RunDecision,
  type RunLoad,
} from '../../../src/limits/admission.js';
import { countOthersActive, holdsCapacity, quotaExceeded, takesSlot } from '../../../src/limits/run-slots.js';
import { RunRequestError } from '../../../src/limits/refusal.js';

const caps: RunCaps = { replicaRuns: 8, namespaceRuns: 20, queueLength: 4, queueTimeoutSeconds: 30 };
const load = (replicaActive: number, namespaceActive: number, waiting: number): RunLoad => ({ replicaActive, namespaceActive, waiting });

describe('fullLimit', () => {
  it.each<[RunLoad, string | undefined]>([
    [load(0, 0, 0), undefined],
    [load(7, 19, 0), undefined],
    [load(8, 8, 0), 'replica_runs'],
    [load(3, 20, 0), 'namespace_runs'],
    // Both full: the replica's own cap is named first.
    [load(8, 20, 0), 'replica_runs'],
  ])('%j → %s', (l, expected) => {
    expect(fullLimit(l, caps)).toBe(expected);
  });
});

describe('decideRun', () => {
  it.each<[string, RunLoad, { atHead: boolean; canWait: boolean }, RunCaps, RunDecision]>([
    ['room, nobody waiting', load(7, 7, 0), { atHead: false, canWait: true }, caps, { kind: 'admit' }],
    ['room, but others wait first (FIFO)', load(7, 7, 2), { atHead: false, canWait: true }, caps, { kind: 'wait' }],
    ['room, at the head of the queue', load(7, 7, 2), { atHead: true, canWait: true }, caps, { kind: 'admit' }],
    ['replica full, queue has room', load(8, 8, 3), { atHead: false, canWait: true }, caps, { kind: 'wait' }],
    ['replica full, queue full', load(8, 8, 4), { atHead: false, canWait: true }, caps, { kind: 'reject', limit: 'replica_runs', cause: 'queue_full' }],
    ['namespace full, queue full', load(2, 20, 4), { atHead: false, canWait: true }, caps, { kind: 'reject', limit: 'namespace_runs', cause: 'queue_full' }],
    [
      'full, no queue configured',
      load(8, 8, 0),
      { atHead: false, canWait: true },
      { ...caps, queueLength: 0 },
      { kind: 'reject', limit: 'replica_runs', cause: 'no_queue' },
    ],
    [
      'full, caller cannot wait (controller)',
      load(8, 8, 0),
      { atHead: false, canWait: false },
      caps,
      { kind: 'reject', limit: 'replica_runs', cause: 'no_queue' },
    ],
    [
      'room but callers wait, caller cannot wait',
      load(1, 1, 1),
      { atHead: false, canWait: false },
      caps,
      { kind: 'reject', limit: 'replica_runs', cause: 'no_queue' },
    ],
    ['full, at the head: keeps waiting', load(8, 8, 1), { atHead: true, canWait: true }, caps, { kind: 'wait' }],
  ])('%s', (_name, l, call, c, expected) => {
    expect(decideRun(l, c, call)).toEqual(expected);
  });
});

describe('retryAfterSeconds', () => {
  it.each<[RunLoad, 'replica_runs' | 'namespace_runs', number, number]>([
    [load(8, 8, 0), 'replica_runs', 5, 1],
    [load(8, 8, 31), 'replica_runs', 4, 16],
    [load(8, 20, 39), 'namespace_runs', 10, 20],
    [load(8, 8, 10_000), 'replica_runs', 60, 300],
    [load(8, 8, 0), 'replica_runs', 0, 1],
  ])('%j %s mean %d s → %d s', (l, limit, mean, expected) => {
    expect(retryAfterSeconds(l, caps, limit, mean)).toBe(expected);
  });
});

describe('messages', () => {
  it.each<[RunLoad, 'replica_runs' | 'namespace_runs', string]>([
    [load(8, 8, 32), 'replica_runs', '8 of 8 runs are executing on this gateway replica (CODEMODE_MAX_CONCURRENT_RUNS) and 32 are waiting'],
    [load(8, 8, 1), 'replica_runs', '8 of 8 runs are executing on this gateway replica (CODEMODE_MAX_CONCURRENT_RUNS) and 1 is waiting'],
    [
      load(3, 20, 0),
      'namespace_runs',
      '20 of 20 runs are executing in namespace sbx across all gateway replicas (CODEMODE_MAX_NAMESPACE_RUNS) and 0 are waiting on this replica',
    ],
  ])('describes %j (%s)', (l, limit, expected) => {
    expect(describeRunLoad(l, caps, limit, 'sbx')).toBe(expected);
  });

  it.each([
    ['queue_full', 'The wait queue is full (CODEMODE_RUN_QUEUE_LENGTH=4).'],
    ['queue_timeout', 'This call waited 30 s (CODEMODE_RUN_QUEUE_TIMEOUT_SECONDS) without getting a slot.'],
    ['no_queue', 'Nothing was started.'],
  ] as const)('a refusal says which limit, how full, why and when to retry (%s)', (cause, sentence) => {
    const err = runRefusal(load(8, 8, 4), caps, 'replica_runs', cause, 'sbx', 4);
    expect(err).toBeInstanceOf(AdmissionError);
    expect(err).toBeInstanceOf(RunRequestError);
    expect(err.limit).toBe('replica_runs');
    expect(err.message).toBe(
      `The run was refused for capacity (replica_runs): 8 of 8 runs are executing on this gateway replica (CODEMODE_MAX_CONCURRENT_RUNS) and 4 are waiting. ${sentence}`,
    );
    expect(err.retryAfterSeconds).toBe(3);
    expect(err.hint).toMatch(/^Retry in 3 seconds\./);
  });
});

describe('sessionRefusal', () => {
  it.each<[number, number, number | undefined, number | undefined]>([
    [0, 5, undefined, undefined],
    [4, 5, 10, undefined],
    [5, 5, 42.2, 43],
    [6, 5, undefined, 60],
    [5, 5, 0.2, 1],
  ])('%d live of %d, next expiry %s s → retry %s s', (live, cap, expiry, retry) => {
    const err = sessionRefusal(live, cap, 'sbx', expiry);
    if (retry === undefined) return expect(err).toBeUndefined();
    expect(err?.limit).toBe('sessions');
    expect(err?.message).toBe(`The session was refused for capacity (sessions): ${live} of ${cap} sessions are live in namespace sbx (CODEMODE_MAX_SESSIONS).`);
    expect(err?.hint).toContain(`retry in ${retry} seconds`);
  });
});

describe('sessionCapacity', () => {
  const now = Date.parse('2026-11-23T12:00:00Z');
  const s = (name: string, expiresInS?: number) => ({ name, ...(expiresInS !== undefined && { expiresAt: new Date(now + expiresInS * 1000).toISOString() }) });
  it.each<[string, ReturnType<typeof s>[], string[], number | undefined]>([
    ['room', [s('a'), s('b')], [], undefined],
    ['full from the cache; retry when the soonest expires', [s('a', 300), s('b', 90), s('c')], [], 90],
    ['our own creations count before the cache shows them', [s('a'), s('b', 30)], ['c'], 30],
    ['a creation already in the cache counts once', [s('a'), s('b')], ['b'], undefined],
    ['already expired sessions give no hint', [s('a', -5), s('b'), s('c')], [], 60],
  ])('%s', (_name, live, creating, retry) => {
    const err = sessionCapacity(live, creating, 3, 'sbx', now);
    if (retry === undefined) return expect(err).toBeUndefined();
    expect(err?.retryAfterSeconds).toBe(retry);
  });
});

describe('quotaExceeded', () => {
  const msg = 'pods "sbx-run-1" is forbidden: exceeded quota: codemode-sandboxes, requested: pods=1, used: pods=20, limited: pods=20';
  it.each<[number | undefined, string, string | undefined]>([
    [403, msg, 'exceeded quota: codemode-sandboxes, requested: pods=1, used: pods=20, limited: pods=20'],
    [403, 'pods is forbidden: User "x" cannot create resource "pods"', undefined],
    [409, msg, undefined],
    [undefined, 'socket hang up', undefined],
  ])('%s %s', (status, message, expected) => {
    expect(quotaExceeded(status, message)).toBe(expected);
  });
});

describe('countOthersActive', () => {
  const run = (executor: string | undefined, extra: { phase?: string; session?: string; deleting?: boolean } = {}) => ({
    metadata: {
      name: 'r',
      ...(executor && { annotations: { 'codemode.dev/executor': executor } }),
      ...(extra.deleting && { deletionTimestamp: new Date('2026-01-01T00:00:00Z') }),
    },
    spec: { ...(extra.session && { session: extra.session }) },
    status: { ...(extra.phase && { phase: extra.phase }) },
  });
  it.each<[string, ReturnType<typeof run>[], number]>([
    ['another replica, executing', [run('other'), run('other', { phase: 'Running' })], 2],
    ['ours are counted in memory, not here', [run('me'), run('other')], 1],
    ['unclaimed (kubectl, maybe Queued) hold no pod', [run(undefined), run(undefined, { phase: 'Pending' })], 0],
    ['finished', [run('other', { phase: 'Succeeded' }), run('other', { phase: 'Failed' }), run('other', { phase: 'TimedOut' })], 0],
    ['in a session', [run('other', { session: 's' })], 0],
    ['being deleted', [run('other', { deleting: true })], 0],
  ])('%s', (_name, runs, expected) => {
    expect(countOthersActive(runs, 'me')).toBe(expected);
  });

  it.each([
    [{ metadata: {} }, true],
    [{ metadata: {}, status: { phase: 'Running' } }, true],
    [{ metadata: { deletionTimestamp: new Date() } }, false],
    [{ metadata: {}, status: { phase: 'Succeeded' } }, false],
    [{ metadata: {}, status: { phase: 'Failed' } }, false],
  ])('holdsCapacity(%j) = %s', (pod, expected) => {
    expect(holdsCapacity(pod)).toBe(expected);
  });
});

describe('takesSlot (when a finished run frees its slot)', () => {
  const pod = (run: string, extra: { deleting?: boolean; phase?: string } = {}) => ({
    metadata: { labels: { 'codemode.dev/run': run }, ...(extra.deleting && { deletionTimestamp: new Date() }) },
    ...(extra.phase && { status: { phase: extra.phase } }),
  });
  /** A reserved pool pod a short warm run used: never labelled with its run. */
  const reservedPod = (name: string, extra: { deleting?: boolean } = {}) => ({
    metadata: {
      name,
      labels: { 'codemode.dev/pool': 'warm' },
      annotations: { 'codemode.dev/reserved-by': '0123456789abcdef' },
      ...(extra.deleting && { deletionTimestamp: new Date() }),
    },
  });
  const run = (phase?: string, podName?: string) => ({ metadata: { name: 'r1' }, ...(phase && { status: { phase, ...(podName && { podName }) } }) });
  it.each<[string, ReturnType<typeof run> | undefined, V1Pod[], boolean]>([
    ['running, pod live', run('Running'), [pod('r1')], true],
    ['final status not in the cache yet (other replicas still count it)', run('Pending'), [], true],
    ['finished, pod still live (the next pod would be one too many)', run('Succeeded'), [pod('r1')], true],
    ['finished, pod terminating', run('Succeeded'), [pod('r1', { deleting: true })], false],
    ['finished, pod gone', run('Failed'), [], false],
    ['finished, pod Failed', run('TimedOut'), [pod('r1', { phase: 'Failed' })], false],
    ["finished, only other runs' pods live", run('Succeeded'), [pod('r2')], false],
    ['run deleted, pod gone', undefined, [], false],
    ['finished, the unlabelled pod its status names still live', run('Succeeded', 'codemode-pool-a'), [reservedPod('codemode-pool-a')], true],
    [
      'finished, the unlabelled pod its status names terminating',
      run('Succeeded', 'codemode-pool-a'),
      [reservedPod('codemode-pool-a', { deleting: true })],
      false,
    ],
    ['finished, another unlabelled pool pod live', run('Succeeded', 'codemode-pool-a'), [reservedPod('codemode-pool-b')], false],
  ])('%s → %s', (_name, r, pods, expected) => {
    expect(takesSlot(r, pods, 'r1')).toBe(expected);
  });
});

describe('RunAdmission', () => {
  afterEach(() => vi.useRealTimers());

  function admission(c: Partial<RunCaps> = {}, others = { n: 0 }) {
    const rejected: string[] = [];
    const a = new RunAdmission({
      caps: { ...caps, replicaRuns: 2, queueLength: 2, queueTimeoutSeconds: 5, ...c },
      namespace: 'sbx',
      othersActive: () => others.n,
      onReject: (l) => void rejected.push(l),
    });
    return { a, rejected, others };
  }

  it('admits up to the cap, queues FIFO up to the queue length, refuses beyond it at once', async () => {
    const { a, rejected } = admission();
    const t1 = await a.acquire();
    const t2 = await a.acquire();
    const order: number[] = [];
    const w3 = a.acquire().then((t) => (order.push(3), t));
    const w4 = a.acquire().then((t) => (order.push(4), t));
    await expect(a.acquire()).rejects.toThrow(
      '2 of 2 runs are executing on this gateway replica (CODEMODE_MAX_CONCURRENT_RUNS) and 2 are waiting. The wait queue is full',
    );
    expect(rejected).toEqual(['replica_runs']);
    expect(a.load()).toEqual({ replicaActive: 2, namespaceActive: 2, waiting: 2 });
    t1.release();
    t1.release(); // idempotent
    const t3 = await w3;
    expect(a.load()).toEqual({ replicaActive: 2, namespaceActive: 2, waiting: 1 });
    t2.release();
    const t4 = await w4;
    expect(order).toEqual([3, 4]);
    t3.release();
    t4.release();
    expect(a.load()).toEqual({ replicaActive: 0, namespaceActive: 0, waiting: 0 });
  });

  it('refuses a queued call after the queue timeout, naming the limit', async () => {
    vi.useFakeTimers();
    const { a, rejected } = admission();
    await a.acquire();
    await a.acquire();
    const waiting = a.acquire();
    const settled = expect(waiting).rejects.toThrow(/This call waited 5 s .* without getting a slot/);
    await vi.advanceTimersByTimeAsync(5000);
    await settled;
    expect(rejected).toEqual(['replica_runs']);
    expect(a.load().waiting).toBe(0);
  });

  it('counts other replicas from othersActive and admits when they finish (poke)', async () => {
    const others = { n: 20 };
    const { a } = admission({ replicaRuns: 8, namespaceRuns: 20 }, others);
    let admitted = false;
    const w = a.acquire().then((t) => ((admitted = true), t));
    await Promise.resolve();
    expect(admitted).toBe(false);
    expect(a.load()).toEqual({ replicaActive: 0, namespaceActive: 20, waiting: 1 });
    others.n = 19;
    a.poke();
    (await w).release();
    expect(admitted).toBe(true);
  });

  it('stops waiting when the caller goes away, without taking a slot', async () => {
    const { a } = admission();
    await a.acquire();
    await a.acquire();
    const ctl = new AbortController();
    const w = a.acquire(ctl.signal);
    ctl.abort(new Error('gone'));
    await expect(w).rejects.toThrow('gone');
    expect(a.load()).toEqual({ replicaActive: 2, namespaceActive: 2, waiting: 0 });
  });

  it('tryAcquire never queues and never overtakes waiting calls', async () => {
    const { a, rejected } = admission({ replicaRuns: 1 });
    const t = a.tryAcquire();
    expect('release' in t).toBe(true);
    const refused = a.tryAcquire();
    expect(refused).toMatchObject({ queued: expect.stringContaining('1 of 1 runs are executing on this gateway replica') });
    const w = a.acquire();
    if ('release' in t) t.release();
    (await w).release();
    expect(rejected).toEqual([]); // a queued kubectl run is not a rejection
  });

  it('tells how every acquire ended and how long it waited (queue wait metric)', async () => {
    vi.useFakeTimers();
    const waits: Array<[string, number]> = [];
    const a = new RunAdmission({
      caps: { ...caps, replicaRuns: 1, queueLength: 2, queueTimeoutSeconds: 5 },
      namespace: 'sbx',
      othersActive: () => 0,
      onWait: (r, s) => void waits.push([r, s]),
    });
    const t1 = await a.acquire(); // at once
    const admitted = a.acquire();
    const ctl = new AbortController();
    const cancelled = a.acquire(ctl.signal);
    const cancelledDone = expect(cancelled).rejects.toThrow('gone');
    await expect(a.acquire()).rejects.toThrow('The wait queue is full'); // refused at once
    await vi.advanceTimersByTimeAsync(2000);
    ctl.abort(new Error('gone'));
    await cancelledDone;
    await vi.advanceTimersByTimeAsync(1000);
    t1.release();
    const t2 = await admitted;
    const timedOut = expect(a.acquire()).rejects.toThrow(/This call waited 5 s/);
    await vi.advanceTimersByTimeAsync(5000);
    await timedOut;
    t2.release();
    expect(waits.map(([r]) => r)).toEqual(['admitted', 'refused', 'cancelled', 'admitted', 'refused']);
    expect(waits.map(([, s]) => Math.round(s))).toEqual([0, 0, 2, 3, 5]);
  });

  it('tells capacity listeners when a slot frees and nobody waits', async () => {
    const { a } = admission();
    let told = 0;
    a.onCapacity(() => told++);
    const t = await a.acquire();
    t.release();
    expect(told).toBe(1);
  });
});
