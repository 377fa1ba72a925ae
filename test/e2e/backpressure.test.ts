// Back-pressure on the real cluster (issue 14, point 5). Two gateway replicas share a namespace:
// A is attacked (100 concurrent execute_code calls against a cap of 8), B serves a benign
// neighbour that keeps calling in its session and now and then runs transient code, and later
// claims kubectl-created runs, which shows the namespace-wide cap across replicas.
// Every call must return — a result or a capacity error naming the limit — none past the queue
// timeout, A never has more than 8 run pods at once (a watch opened before the burst counts them),
// sessions and JSON-RPC batches are capped, and kubectl-created runs wait Queued, then complete.
import { readFileSync } from 'node:fs';
import { Watch, type V1Pod, type V1ResourceQuota } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GROUP, SANDBOXRUN_PLURAL, VERSION, type SandboxRun } from '../../src/api/v1alpha1/index.js';
import { startBenignNeighbour, type BenignNeighbour } from './helpers/benign.js';
import { createNamespace, deleteNamespace, testKube, until } from './helpers/kube.js';
import { connect, startOperator, type RunningOperator, type TestClient, type ToolResult } from './helpers/operator.js';

const k = testKube();
const api = { group: GROUP, version: VERSION, plural: SANDBOXRUN_PLURAL };
const QUEUE_TIMEOUT_SECONDS = 20;
// Small CPU requests: the test needs 9 pods at once on a 2-core node that other suites share.
const SHARED = { CODEMODE_MAX_NAMESPACE_RUNS: '9', CODEMODE_MAX_SESSIONS: '3', CODEMODE_MAX_BATCH_SIZE: '5', CODEMODE_CPU_REQUEST: '10m' };
let ns = '';
let a: RunningOperator;
let b: RunningOperator;
let neighbour: BenignNeighbour | undefined;

beforeAll(async () => {
  ns = await createNamespace(k, 'pressure');
  a = await startOperator(ns, {
    ...SHARED,
    CODEMODE_MAX_CONCURRENT_RUNS: '8',
    CODEMODE_RUN_QUEUE_LENGTH: '16',
    CODEMODE_RUN_QUEUE_TIMEOUT_SECONDS: String(QUEUE_TIMEOUT_SECONDS),
    // On a node loaded by other suites a pod can take a minute to start: such a run then ends
    // with a clear error before the test client's own 120 s timeout.
    CODEMODE_POD_STARTUP_TIMEOUT_SECONDS: '80',
  });
  b = await startOperator(ns, { ...SHARED, CODEMODE_MAX_CONCURRENT_RUNS: '4' });
  neighbour = await startBenignNeighbour(b.url, { runEvery: 5, pauseMs: 200 });
});
afterAll(async () => {
  await neighbour?.stop().catch(() => undefined);
  await a?.stop();
  await b?.stop();
  await deleteNamespace(k, ns);
});

/** Records every event of a watch from now on; `ended` tells whether it stopped on its own. */
async function record<T>(path: string, labelSelector?: string): Promise<{ events: Array<{ type: string; obj: T }>; ended: () => boolean; stop: () => void }> {
  const events: Array<{ type: string; obj: T }> = [];
  let ended = false;
  const ctl = await new Watch(k.kc).watch(
    path,
    labelSelector ? { labelSelector } : {},
    (type: string, obj: T) => void events.push({ type, obj }),
    () => (ended = true),
  );
  return { events, ended: () => ended, stop: () => ctl.abort() };
}

/** Most pods at once that held capacity (not terminating, not finished) and belong to `runs`. */
function maxConcurrentPods(events: Array<{ type: string; obj: V1Pod }>, runs: Set<string>): number {
  const live = new Set<string>();
  let max = 0;
  for (const { type, obj } of events) {
    const owner = obj.metadata?.ownerReferences?.find((o) => o.kind === 'SandboxRun')?.name;
    if (owner === undefined || !runs.has(owner)) continue;
    const name = obj.metadata?.name ?? '';
    const holds = type !== 'DELETED' && !obj.metadata?.deletionTimestamp && !['Succeeded', 'Failed'].includes(obj.status?.phase ?? '');
    if (holds) live.add(name);
    else live.delete(name);
    max = Math.max(max, live.size);
  }
  return max;
}

async function listRuns(): Promise<SandboxRun[]> {
  return ((await k.custom.listNamespacedCustomObject({ ...api, namespace: ns })) as { items: SandboxRun[] }).items;
}

const text = (r: ToolResult): string => r.content.map((c) => c.text ?? '').join('\n');
const CAPACITY = /The run was refused for capacity \((replica_runs|namespace_runs)\): \d+ of \d+ runs are executing .*\nRetry in \d+ seconds\./s;

describe('back-pressure', () => {
  it('answers 100 concurrent calls against a cap of 8: each a result or a clear capacity error, none past the queue timeout, never more than 8 pods', async () => {
    const pods = await record<V1Pod>(`/api/v1/namespaces/${ns}/pods`, 'codemode.dev/run');
    const client: TestClient = await connect(a.url, 'current');
    const calls = Array.from({ length: 100 }, async (_, i) => {
      const t0 = performance.now();
      const r = await client.callTool('execute_code', { code: `print("ok ${i}")` });
      return { i, r, ms: performance.now() - t0 };
    });
    const results = await Promise.all(calls);
    await client.close();
    // Let the last pods' deletions arrive before counting.
    await new Promise((r) => setTimeout(r, 2000));
    // A watch that stopped on its own (error, inactivity) would have missed pods.
    const endedEarly = pods.ended();
    pods.stop();

    // A run's result (structuredContent with its phase), or a capacity error that created nothing.
    const ran = results.filter(({ r }) => r.structuredContent?.phase !== undefined);
    const refused = results.filter(({ r }) => r.structuredContent?.phase === undefined);
    for (const { i, r } of ran) {
      if (!r.isError) expect(r.structuredContent).toMatchObject({ phase: 'Succeeded', stdout: `ok ${i}\n` });
    }
    expect(ran.filter(({ r }) => !r.isError).length).toBeGreaterThanOrEqual(1);
    for (const { r, ms } of refused) {
      expect(r.isError).toBe(true);
      expect(text(r)).toMatch(CAPACITY);
      expect(ms).toBeLessThan((QUEUE_TIMEOUT_SECONDS + 10) * 1000);
    }
    expect(ran.length).toBeGreaterThanOrEqual(8);
    // 8 executing + 16 waiting: most of the rest were refused at once (queue full). Not exactly
    // 76: the calls arrive over a moment, and slots that free meanwhile let a few more in.
    expect(refused.length).toBeGreaterThanOrEqual(50);
    expect(refused.some(({ r }) => text(r).includes('The wait queue is full (CODEMODE_RUN_QUEUE_LENGTH=16)'))).toBe(true);

    // A's runs are those it executed (its identity in the executor annotation); B's neighbour
    // runs share the namespace and are not counted against A's cap.
    const runs = await listRuns();
    const mine = new Set(runs.filter((r) => r.metadata.annotations?.['codemode.dev/executor'] === a.operator.identity).map((r) => r.metadata.name));
    // A refused call created nothing.
    expect(mine.size).toBe(ran.length);
    expect(endedEarly).toBe(false);
    const max = maxConcurrentPods(pods.events, mine);
    expect(max).toBeGreaterThanOrEqual(1);
    expect(max).toBeLessThanOrEqual(8);
  }, 300_000);

  it('caps live sessions in the namespace (the neighbour holds one of 3)', async () => {
    const client = await connect(a.url, '2025');
    const created: string[] = [];
    try {
      for (let i = 0; i < 2; i++) {
        const r = await client.callTool('create_session', { language: 'bash' });
        expect(r.isError, text(r)).toBeFalsy();
        created.push(String(r.structuredContent?.session));
      }
      const over = await client.callTool('create_session', { language: 'bash' });
      expect(over.isError).toBe(true);
      expect(text(over)).toMatch(
        new RegExp(
          `The session was refused for capacity \\(sessions\\): 3 of 3 sessions are live in namespace ${ns} \\(CODEMODE_MAX_SESSIONS\\)\\.\\nClose a session you no longer need with close_session .* retry in \\d+ seconds`,
          's',
        ),
      );
      // Room again once one is closed.
      await client.callTool('close_session', { session: created.pop() });
      await until(
        async () => {
          const list = (await client.callTool('list_sessions', {})).structuredContent?.sessions as unknown[];
          return list.length === 2;
        },
        30_000,
        'the closed session to leave the cache',
      );
      const again = await client.callTool('create_session', { language: 'bash' });
      expect(again.isError, text(again)).toBeFalsy();
      created.push(String(again.structuredContent?.session));
    } finally {
      for (const s of created) await client.callTool('close_session', { session: s });
      await client.close();
    }
  }, 240_000);

  it('refuses a JSON-RPC batch over the limit with HTTP 400 and a JSON-RPC error, running none of it', async () => {
    // The neighbour on B keeps creating runs, so count only this batch's: its code is unique.
    const code = `print("batch-${Date.now()}")`;
    const ofBatch = async (): Promise<number> => (await listRuns()).filter((r) => r.spec.code === code).length;
    const batch = Array.from({ length: 6 }, (_, i) => ({
      jsonrpc: '2.0',
      id: i + 1,
      method: 'tools/call',
      params: { name: 'execute_code', arguments: { code } },
    }));
    const res = await fetch(a.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-03-26' },
      body: JSON.stringify(batch),
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { code: number; message: string } };
    expect(body.error.code).toBe(-32600);
    expect(body.error.message).toContain('this JSON-RPC batch holds 6 messages; the limit is 5 (CODEMODE_MAX_BATCH_SIZE)');
    expect(await ofBatch()).toBe(0);
  });

  it('kept the benign neighbour correct throughout', async () => {
    const report = await neighbour?.stop();
    neighbour = undefined;
    expect(report?.failures).toEqual([]);
    expect(report?.calls).toBeGreaterThan(5);
  });

  it('queues kubectl-created runs above the namespace cap (across replicas), then completes them all', async () => {
    const runs = await record<SandboxRun>(`/apis/${GROUP}/${VERSION}/namespaces/${ns}/${SANDBOXRUN_PLURAL}`);
    // Fill A's 8 slots with runs that take a while, so the namespace (cap 9) has one slot left.
    const client = await connect(a.url, 'current');
    const long = Array.from({ length: 8 }, () =>
      client
        .callTool('execute_code', { code: 'import time; time.sleep(12); print("long")' })
        .catch((err: unknown) => ({ content: [{ type: 'text', text: String(err) }] }) as ToolResult),
    );
    await until(
      async () =>
        (await listRuns()).filter((r) => r.status?.phase === 'Running' && r.metadata.annotations?.['codemode.dev/executor'] === a.operator.identity).length ===
        8,
      120_000,
      "A's 8 long runs to be Running",
    );
    const names = ['q1', 'q2', 'q3', 'q4'];
    for (const name of names) {
      await k.custom.createNamespacedCustomObject({
        ...api,
        namespace: ns,
        body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'SandboxRun', metadata: { name }, spec: { language: 'bash', code: `sleep 1; echo ${name}` } },
      });
    }
    await until(
      async () => {
        const all = await listRuns();
        return names.every((n) => ['Succeeded', 'Failed', 'TimedOut'].includes(all.find((r) => r.metadata.name === n)?.status?.phase ?? ''));
      },
      180_000,
      'the kubectl-created runs to finish',
    );
    for (const r of await Promise.all(long)) expect(r.structuredContent).toMatchObject({ phase: 'Succeeded', stdout: 'long\n' });
    await client.close();
    runs.stop();

    const final = await listRuns();
    for (const n of names) expect(final.find((r) => r.metadata.name === n)?.status).toMatchObject({ phase: 'Succeeded', stdout: `${n}\n` });
    // At least three waited as Pending/Queued, saying how full the caps were.
    const queued = new Set(
      runs.events.filter(({ obj }) => obj.status?.reason === 'Queued' && obj.status.phase === 'Pending').map(({ obj }) => obj.metadata.name),
    );
    expect(queued.size).toBeGreaterThanOrEqual(3);
    const message = runs.events.find(({ obj }) => obj.status?.reason === 'Queued')?.obj.status?.message ?? '';
    expect(message).toMatch(/^Waiting for a free run slot: \d+ of \d+ runs are executing .*The run starts when one is free\.$/);
    // While A's 8 runs executed, B (cap 4) took one kubectl run at a time: the namespace cap of
    // 9, counted from the SandboxRuns both replicas watch. (Once slots free on both replicas at
    // the same instant the cap is soft; the ResourceQuota is the hard backstop.)
    const active = new Map<string, boolean>();
    let max = 0;
    for (const { type, obj } of runs.events) {
      const done = type === 'DELETED' || ['Succeeded', 'Failed', 'TimedOut'].includes(obj.status?.phase ?? '');
      // The first of A's long runs to finish ends the phase (the watch first lists older runs, done long ago).
      if (done && active.get(obj.metadata.name) === true && !names.includes(obj.metadata.name)) break;
      const claimed = obj.metadata.annotations?.['codemode.dev/executor'] !== undefined;
      active.set(obj.metadata.name, claimed && !done && obj.spec.session === undefined);
      max = Math.max(max, [...active.values()].filter(Boolean).length);
    }
    expect(max).toBe(9);
  }, 300_000);
});

describe("ResourceQuota backstop (the chart's, as rendered in deploy/codemode-operator.yaml)", () => {
  let qns = '';
  let op: RunningOperator | undefined;
  afterAll(async () => {
    await op?.stop();
    if (qns) await deleteNamespace(k, qns);
  });

  it("turns the API server's quota refusals into clear errors: QuotaExceeded for a pod, a named quota for a SandboxRun", async () => {
    qns = await createNamespace(k, 'quota');
    // The shipped quota, made small: one pod, three SandboxRuns.
    const quota = parseAllDocuments(readFileSync('deploy/codemode-operator.yaml', 'utf8'))
      .map((d) => d.toJS() as V1ResourceQuota & { kind?: string })
      .find((d) => d?.kind === 'ResourceQuota') as V1ResourceQuota;
    quota.metadata = { name: 'codemode-sandboxes', namespace: qns };
    quota.spec = { hard: { ...quota.spec?.hard, pods: '1', 'count/sandboxruns.codemode.dev': '3' } };
    await k.core.createNamespacedResourceQuota({ namespace: qns, body: quota });
    // The API server refuses everything under a quota whose usage is not computed yet.
    await until(
      async () => (await k.core.readNamespacedResourceQuota({ namespace: qns, name: 'codemode-sandboxes' })).status?.hard?.pods === '1',
      60_000,
      'the quota status',
    );
    op = await startOperator(qns, { CODEMODE_CPU_REQUEST: '10m' });
    const client = await connect(op.url, 'current');
    try {
      // Settled with its error too, so a failure below leaves no unhandled rejection behind.
      const long = client
        .callTool('execute_code', { code: 'import time; time.sleep(6); print("first")' })
        .catch((err: unknown) => ({ content: [{ type: 'text', text: String(err) }] }) as ToolResult);
      await until(
        async () => (await k.core.listNamespacedPod({ namespace: qns, labelSelector: 'codemode.dev/run' })).items.some((p) => p.status?.phase === 'Running'),
        90_000,
        'the first run pod to be Running',
      );
      const second = await client.callTool('execute_code', { code: 'print("second")' });
      expect(second.isError).toBe(true);
      expect(second.structuredContent).toMatchObject({ phase: 'Failed', reason: 'QuotaExceeded' });
      expect(text(second)).toMatch(
        /The run failed \(QuotaExceeded\)\. The namespace's ResourceQuota refused the sandbox pod \(exceeded quota: codemode-sandboxes, requested: pods=1, used: pods=1, limited: pods=1\)/,
      );
      expect((await long).structuredContent).toMatchObject({ phase: 'Succeeded', stdout: 'first\n' });

      // Sandbox pods satisfy the quota's CPU, memory and ephemeral-storage requirements.
      await until(
        async () => (await k.core.listNamespacedPod({ namespace: qns, labelSelector: 'codemode.dev/run' })).items.length === 0,
        60_000,
        'the first pod to go',
      );
      const third = await client.callTool('execute_code', { code: 'print("third")' });
      expect(third.structuredContent).toMatchObject({ phase: 'Succeeded', stdout: 'third\n' });

      const fourth = await client.callTool('execute_code', { code: 'print("fourth")' });
      expect(fourth.isError).toBe(true);
      expect(text(fourth)).toMatch(
        /The run was refused: the namespace \S+ is at its ResourceQuota \(exceeded quota: codemode-sandboxes, requested: count\/sandboxruns\.codemode\.dev=1, used: count\/sandboxruns\.codemode\.dev=3, limited: count\/sandboxruns\.codemode\.dev=3\)/,
      );
    } finally {
      await client.close();
    }
  }, 240_000);
});
