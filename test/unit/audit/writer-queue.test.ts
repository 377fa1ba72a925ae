// The writer's queue rules: which failed writes are retried, for how long, and whose calls are
// dropped when the shared queue is full. Only the queue logic is under test here, so the two API
// calls the writer makes are a stub: the real client is in writer.test.ts (a closed port) and the
// real API server in test/e2e/audit-record.test.ts.
import { pino } from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { AuditWriter, type AuditResult, type AuditWriterOptions } from '../../../src/audit/writer.js';
import type { KubeClients } from '../../../src/kube/clients.js';
import type { AuditEntry } from '../../../src/audit/record.js';
import { finishedCall } from './entries.js';

const entry = finishedCall;

const apiErr = (code: number): Error => Object.assign(new Error(`HTTP-Code: ${code}`), { code, body: '{"message":"secret = 1"}' });
const quotaErr = (): Error =>
  Object.assign(new Error('HTTP-Code: 403'), {
    code: 403,
    body: JSON.stringify({
      message:
        'sandboxruns.codemode.dev "run-x" is forbidden: exceeded quota: codemode-sandboxes, requested: count/sandboxruns.codemode.dev=1, used: count/sandboxruns.codemode.dev=2000, limited: count/sandboxruns.codemode.dev=2000',
    }),
  });
const refused = (): Error =>
  new TypeError('fetch failed', { cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6443'), { code: 'ECONNREFUSED' }) });

/**
 * A writer whose create answers with `fail(name, attempt)` (thrown when defined, awaited first
 * when a promise; attempt counts from 1 per record name), and what it wrote: the calls of each
 * record, by name.
 */
function harness(
  opts: Partial<AuditWriterOptions>,
  fail: (name: string, attempt: number) => unknown = () => undefined,
): {
  writer: AuditWriter;
  results: AuditResult[];
  written: string[];
  attempts: Map<string, number>;
  logs: string[];
  queueLengths: number[];
  /** The two API calls the writer makes (a test may replace one). */
  custom: object;
} {
  const results: AuditResult[] = [];
  const written: string[] = [];
  const attempts = new Map<string, number>();
  const logs: string[] = [];
  const queueLengths: number[] = [];
  const custom = {
    createNamespacedCustomObject: async (req: { body: { metadata: { name: string } } }): Promise<object> => {
      const name = req.body.metadata.name;
      const attempt = (attempts.get(name) ?? 0) + 1;
      attempts.set(name, attempt);
      const err = await fail(name, attempt);
      if (err !== undefined) throw err as Error;
      return {};
    },
    patchNamespacedCustomObjectStatus: (req: { name: string; body: { status: { calls?: Array<{ name: string }> } } }): Promise<object> => {
      written.push(...(req.body.status.calls?.map((c) => c.name) ?? [req.name]));
      return Promise.resolve({});
    },
  };
  const log = pino({ level: 'debug' }, { write: (l: string) => void logs.push(l) });
  const writer = new AuditWriter(
    { custom } as unknown as KubeClients,
    { capacity: 100, onResult: (r) => results.push(r), onQueue: (n) => queueLengths.push(n), ...opts },
    log,
  );
  return { writer, results, written, attempts, logs, queueLengths, custom };
}

const count = (results: AuditResult[], r: AuditResult): number => results.filter((x) => x === r).length;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('AuditWriter: which failed writes are retried, and for how long', () => {
  it.each<[string, unknown]>([
    ['a TypeError building or sending the body', new TypeError('Cannot convert "secret = 1" to a string')],
    ['a RangeError', new RangeError('Invalid string length: secret = 1')],
    ['a 422 the API server answered', apiErr(422)],
    ['a 403 that is not a quota (RBAC)', apiErr(403)],
  ])('%s is dropped at once and does not stall the next session’s record', async (_what, err) => {
    const h = harness({ lingerMs: 0, concurrency: 1 }, (name) => (name === 'bad' ? err : undefined));
    h.writer.record(entry('alice', 's1', 'bad'));
    h.writer.record(entry('bob', 's2', 'good'));
    // Well before the first back-off (500 ms) would end.
    await vi.waitFor(() => expect(h.results).toEqual(['dropped', 'written']), { timeout: 300, interval: 10 });
    expect(h.written).toEqual(['good']);
    await sleep(700);
    expect(h.attempts.get('bad')).toBe(1);
    expect(h.writer.length).toBe(0);
    // Counts and the class or status only: never the record or the error's message.
    expect(h.logs.join('')).toContain('Dropped audit records of session calls');
    expect(h.logs.join('')).not.toContain('secret');
    await h.writer.stop(100);
  });

  it.each<[string, () => unknown]>([
    ['refused (fetch failed, ECONNREFUSED)', refused],
    ['a request timeout', () => new DOMException('The operation was aborted due to timeout', 'TimeoutError')],
    ['503 while the API server starts', () => apiErr(503)],
    // Filled by whoever calls most (or by runs): it frees up as records and runs reach their TTL.
    ['403 of a full ResourceQuota', () => quotaErr()],
  ])('%s is retried and written once the API server answers', async (_what, err) => {
    const h = harness({ lingerMs: 0 }, (_name, attempt) => (attempt <= 2 ? err() : undefined));
    h.writer.record(entry('alice', 's1', 'r0'));
    // Back-off 500 ms, then 1 s.
    await vi.waitFor(() => expect(h.results).toEqual(['written']), { timeout: 3000, interval: 20 });
    expect(h.written).toEqual(['r0']);
    expect(h.attempts.get('r0')).toBe(3);
    expect(h.logs.join('')).not.toContain('secret');
    await h.writer.stop(100);
  });

  it('drops a record whose writes failed (503) for longer than retryForMs, and goes on writing', async () => {
    const h = harness({ lingerMs: 0, concurrency: 1, retryForMs: 100 }, (name) => (name === 'stuck' ? apiErr(503) : undefined));
    h.writer.record(entry('alice', 's1', 'stuck'));
    h.writer.record(entry('bob', 's2', 'ok-0'));
    await vi.waitFor(() => expect(h.results.slice().sort()).toEqual(['dropped', 'written']), { timeout: 3000, interval: 20 });
    expect(h.written).toEqual(['ok-0']);
    const tries = h.attempts.get('stuck');
    expect(h.writer.length).toBe(0);
    h.writer.record(entry('alice', 's1', 'ok-1'));
    await vi.waitFor(() => expect(h.written).toEqual(['ok-0', 'ok-1']), { timeout: 3000, interval: 20 });
    // Not tried again once dropped.
    expect(h.attempts.get('stuck')).toBe(tries);
    await h.writer.stop(100);
  });
});

describe('AuditWriter: a full queue drops the calls of the user holding the most', () => {
  it('admits other users’ calls in place of the largest holder’s newest, and drops the largest holder’s (and a tie’s) own', async () => {
    // Nothing is due before stop(): every call waits in the queue.
    const h = harness({ capacity: 4, lingerMs: 60_000 });
    // alice fills the queue from two sessions, interleaved: her newest is a3 (s2), then a2 (s1), then a1 (s2).
    const alice = [entry('alice', 's1', 'a0'), entry('alice', 's2', 'a1'), entry('alice', 's1', 'a2'), entry('alice', 's2', 'a3')];
    expect(alice.map((e) => h.writer.record(e))).toEqual([true, true, true, true]);
    const later: Array<[AuditEntry, boolean]> = [
      [entry('alice', 's1', 'a4'), false], // alice 4: she holds the most, her own call goes
      [entry('bob', 's3', 'b0'), true], // bob 0 < alice 4: a3 goes
      [entry('carol', 's4', 'c0'), true], // carol 0 < alice 3: a2 goes
      [entry('bob', 's3', 'b1'), true], // bob 1 < alice 2: a1 goes (and s2 with it)
      [entry('bob', 's3', 'b2'), false], // bob 2 is the most (alice 1, carol 1): his own call goes
      [entry('carol', 's4', 'c1'), true], // carol 1 < bob 2: b1 goes
    ];
    for (const [e, admitted] of later) expect([e.name, h.writer.record(e)]).toEqual([e.name, admitted]);
    expect(h.writer.length).toBe(4);
    expect(h.queueLengths.at(-1)).toBe(4);
    expect(count(h.results, 'dropped')).toBe(6);
    await h.writer.stop(1000);
    expect(h.written.slice().sort()).toEqual(['a0', 'b0', 'c0', 'c1']);
    expect(count(h.results, 'written')).toBe(4);
    expect(h.writer.length).toBe(0);
  });

  it('after a failed write puts its calls back over the bound, drops the newest calls of the largest holder', async () => {
    let answer: (err: unknown) => void = () => undefined;
    const failed = new Promise<unknown>((r) => (answer = r));
    // bob's first write hangs until answered (503); everything after succeeds.
    const h = harness({ capacity: 4, lingerMs: 0, concurrency: 1 }, (name, attempt) => (name === 'b0' && attempt === 1 ? failed : undefined));
    h.writer.record(entry('bob', 's1', 'b0')); // taken at once: the one writer is busy with it
    for (const name of ['a0', 'a1', 'a2', 'a3']) expect(h.writer.record(entry('alice', 's2', name))).toBe(true);
    expect(h.writer.length).toBe(4);
    answer(apiErr(503));
    // b0 comes back (5 over 4): alice holds the most, her newest goes.
    await vi.waitFor(() => expect(count(h.results, 'dropped')).toBe(1), { timeout: 300, interval: 5 });
    expect(h.writer.length).toBe(4);
    await h.writer.stop(3000);
    expect(h.written.slice().sort()).toEqual(['a0', 'a1', 'a2', 'b0']);
    expect(count(h.results, 'written')).toBe(4);
  });
});

describe('AuditWriter: every dropped call reaches the log, however the drops bunch', () => {
  /** The calls the log lines report dropped, and the calls they report still being written. */
  const logged = (logs: string[]): { dropped: number; writing: number } => {
    const sum = { dropped: 0, writing: 0 };
    for (const l of logs.map((line) => JSON.parse(line) as { dropped?: number; writing?: number })) {
      sum.dropped += l.dropped ?? 0;
      sum.writing += l.writing ?? 0;
    }
    return sum;
  };
  /** alice's five calls in a queue of one that writes nothing before stop: four are dropped at once. */
  const burst = (h: ReturnType<typeof harness>): void => {
    for (let i = 0; i < 5; i++) h.writer.record(entry('alice', 's1', `a${i}`));
    expect(count(h.results, 'dropped')).toBe(4);
  };

  it('logs the drops after the first line once the interval has passed, though no drop follows', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    try {
      const h = harness({ capacity: 1, lingerMs: 3_600_000 });
      burst(h);
      expect(logged(h.logs).dropped).toBe(1);
      await vi.advanceTimersByTimeAsync(60_000);
      expect(logged(h.logs).dropped).toBe(4);
      vi.useRealTimers();
      await h.writer.stop(1000);
      expect(logged(h.logs).dropped).toBe(4);
    } finally {
      vi.useRealTimers();
    }
  });

  it('logs the drops not yet logged when it stops (the process exits, its metrics with it)', async () => {
    const h = harness({ capacity: 1, lingerMs: 3_600_000 });
    burst(h);
    await h.writer.stop(1000);
    expect(h.written).toEqual(['a0']);
    expect(logged(h.logs).dropped).toBe(4);
    expect(h.logs.join('')).not.toContain('secret');
  });

  it('says on stop how many calls are still being written when its time is up', async () => {
    const h = harness({ lingerMs: 0 }, () => new Promise(() => undefined));
    h.writer.record(entry('alice', 's1', 'a0'));
    h.writer.record(entry('bob', 's2', 'b0'));
    await vi.waitFor(() => expect(h.attempts.size).toBe(2), { timeout: 300, interval: 5 });
    await h.writer.stop(50);
    expect(logged(h.logs)).toEqual({ dropped: 0, writing: 2 });
  });
});

describe('AuditWriter: stopping while it backs off', () => {
  it('tries the queued calls at once rather than sit out a back-off longer than its time to stop', async () => {
    // Three 503s: back-off 500 ms, 1 s, then 2 s — longer than the second stop() has.
    const h = harness({ lingerMs: 0 }, (_name, attempt) => (attempt <= 3 ? apiErr(503) : undefined));
    h.writer.record(entry('alice', 's1', 'r0'));
    await vi.waitFor(() => expect(h.attempts.get('r0')).toBe(3), { timeout: 3000, interval: 10 });
    await h.writer.stop(1000);
    expect(h.results).toEqual(['written']);
    expect(h.written).toEqual(['r0']);
  });
});

describe('AuditWriter: a record deleted before its status was written', () => {
  it('counts its calls dropped, not written: nothing of them was recorded', async () => {
    const h = harness({ lingerMs: 0 });
    (h.custom as { patchNamespacedCustomObjectStatus: () => Promise<object> }).patchNamespacedCustomObjectStatus = () => Promise.reject(apiErr(404));
    h.writer.record(entry('alice', 's1', 'r0'));
    await vi.waitFor(() => expect(h.results).toEqual(['dropped']), { timeout: 1000, interval: 10 });
    await h.writer.stop(100);
  });
});
