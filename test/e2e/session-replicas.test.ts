// Two gateway replicas in one namespace, each with a warm pool: a session created through one is
// used through the other at once, and keeps one interpreter. Both replicas' session controllers
// reconcile every new session and can each claim a pool pod for it; one claim must win, the other
// pod go, and the session's pod never change once recorded (a helm upgrade under load found calls
// split between two interpreters).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNamespace, deleteNamespace, testKube, until } from './helpers/kube.js';
import { connect, startOperator, type RunningOperator, type TestClient, type ToolResult } from './helpers/operator.js';

const k = testKube();
let ns = '';
let a: RunningOperator;
let b: RunningOperator;
let viaA: TestClient;
let viaB: TestClient;

beforeAll(async () => {
  ns = await createNamespace(k, 'sess-replicas');
  const env = { CODEMODE_WARM_POOL_MIN: '3', CODEMODE_WARM_POOL_MAX: '3', CODEMODE_CPU_REQUEST: '10m' };
  [a, b] = await Promise.all([startOperator(ns, env), startOperator(ns, env)]);
  [viaA, viaB] = await Promise.all([connect(a.url, 'current'), connect(b.url, 'current')]);
});
afterAll(async () => {
  await viaA?.close();
  await viaB?.close();
  await a?.stop();
  await b?.stop();
  await deleteNamespace(k, ns);
});

const sc = (r: ToolResult): Record<string, unknown> => r.structuredContent ?? {};
const text = (r: ToolResult): string => JSON.stringify(r.content);

async function sessionPods(): Promise<Map<string, string[]>> {
  const pods = (await k.core.listNamespacedPod({ namespace: ns })).items.filter((p) => !p.metadata?.deletionTimestamp);
  const bySession = new Map<string, string[]>();
  for (const p of pods) {
    const owner = p.metadata?.ownerReferences?.find((o) => o.controller && o.kind === 'SandboxSession');
    if (owner) bySession.set(owner.name, [...(bySession.get(owner.name) ?? []), p.metadata?.name ?? '']);
  }
  return bySession;
}

describe('sessions across replicas', () => {
  it('uses a session created through one replica through the other at once, in one interpreter', async () => {
    // Wait until both pools are warm, so both session controllers have a pod to claim.
    await until(
      async () => (await k.core.listNamespacedPod({ namespace: ns, labelSelector: 'codemode.dev/pool=warm' })).items.length >= 3,
      180_000,
      'a warm pool',
    );
    const sessions: string[] = [];
    for (let i = 0; i < 4; i++) {
      const created = await viaA.callTool('create_session', { language: 'python' });
      expect(created.isError ?? false, text(created)).toBe(false);
      const s = String(sc(created).session);
      sessions.push(s);
      const set = await viaB.callTool('execute_code', { session: s, code: `x = ${i}` });
      expect(set.isError ?? false, text(set)).toBe(false);
      for (const [n, client] of [viaA, viaB, viaA, viaB].entries()) {
        const r = await client.callTool('execute_code', { session: s, code: 'x' });
        expect(sc(r), `session ${s}, read ${n}`).toMatchObject({ phase: 'Succeeded', result: String(i) });
      }
    }
    // Every session ends up owning exactly one pod: the one its status names.
    await until(
      async () => {
        const pods = await sessionPods();
        return sessions.every((s) => pods.get(s)?.length === 1);
      },
      60_000,
      'one pod per session',
    );
  }, 600_000);
});

describe('a node session busy in synchronous code', () => {
  // A Node kernel answers nothing, not even the ping that opens a stream, while synchronous code
  // runs. The other replica's call finds the session busy: it must wait for it (or give up as
  // busy), never take the silence for a dead kernel and mark the session lost.
  it('is waited for through the other replica, and keeps its state', async () => {
    const created = await viaA.callTool('create_session', { language: 'node' });
    expect(created.isError ?? false, text(created)).toBe(false);
    const s = String(sc(created).session);
    expect(sc(await viaA.callTool('execute_code', { session: s, code: 'kept = 7' })), 'set').toMatchObject({ phase: 'Succeeded' });
    const long = viaA.callTool('execute_code', {
      session: s,
      code: "const t0 = Date.now(); while (Date.now() - t0 < 45_000) {} 'done'",
      timeout_seconds: 90,
    });
    await new Promise((r) => setTimeout(r, 2000));
    const other = await viaB.callTool('execute_code', { session: s, code: 'kept + 1', timeout_seconds: 10 });
    // It waited for its turn (the long call ended), then ran.
    expect(sc(other), text(other)).toMatchObject({ phase: 'Succeeded', result: '8' });
    expect(sc(await long), 'the long call').toMatchObject({ phase: 'Succeeded', result: "'done'" });
    const after = await viaB.callTool('execute_code', { session: s, code: 'kept' });
    expect(sc(after), text(after)).toMatchObject({ phase: 'Succeeded', result: '7' });
  }, 300_000);
});
