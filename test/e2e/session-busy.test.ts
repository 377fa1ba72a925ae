// A session runs one call at a time. Calls that arrive while it is busy — through either of two
// replicas, or as SandboxRuns created with kubectl — wait for their turn and run once each; a call
// still waiting when its allowance (CODEMODE_POD_STARTUP_TIMEOUT_SECONDS) is over ends with
// SessionBusy and never runs. Before, each of them failed at once with a KernelBusy "exception".
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  API_VERSION,
  GROUP,
  SANDBOXRUN_KIND,
  SANDBOXRUN_PLURAL,
  SANDBOXSESSION_PLURAL,
  VERSION,
  isTerminalPhase,
  type SandboxRun,
  type SandboxSession,
} from '../../src/api/v1alpha1/index.js';
import { KILLED_INTERPRETER_MESSAGE } from '../../src/controller/session-status.js';
import { createNamespace, deleteNamespace, readyPoolPods, testKube, until } from './helpers/kube.js';
import { connect, startOperator, type RunningOperator, type TestClient, type ToolResult } from './helpers/operator.js';

/** How long a call may wait for a busy session here (the start-up allowance of a run). */
const WAIT_SECONDS = 15;

const k = testKube();
let ns = '';
let a: RunningOperator;
let b: RunningOperator;
let viaA: TestClient;
let viaB: TestClient;

beforeAll(async () => {
  ns = await createNamespace(k, 'sess-busy');
  const env = {
    CODEMODE_WARM_POOL_MIN: '1',
    CODEMODE_WARM_POOL_MAX: '2',
    CODEMODE_CPU_REQUEST: '10m',
    CODEMODE_POD_STARTUP_TIMEOUT_SECONDS: String(WAIT_SECONDS),
  };
  [a, b] = await Promise.all([startOperator(ns, env, { metrics: true }), startOperator(ns, env, { metrics: true })]);
  [viaA, viaB] = await Promise.all([connect(a.url, 'current'), connect(b.url, 'current')]);
  // Sessions take pool pods, so the short start-up allowance is not what these tests measure.
  await until(async () => (await readyPoolPods(k, ns)).length > 0, 180_000, 'a ready pool pod');
}, 300_000);
afterAll(async () => {
  await viaA?.close();
  await viaB?.close();
  await a?.stop();
  await b?.stop();
  await deleteNamespace(k, ns);
});

/** Calls that found their session busy and ended so, on both replicas (codemode_session_wait_seconds). */
async function waits(result: string): Promise<number> {
  let n = 0;
  for (const o of [a, b]) {
    const text = (await o.metrics?.registry.metrics()) ?? '';
    n += Number(new RegExp(`codemode_session_wait_seconds_count\\{result="${result}"\\} (\\d+)`).exec(text)?.[1] ?? 0);
  }
  return n;
}

const sc = (r: ToolResult): Record<string, unknown> => r.structuredContent ?? {};
const text = (r: ToolResult): string => JSON.stringify(r.content);
const api = (): { group: string; version: string; plural: string; namespace: string } => ({
  group: GROUP,
  version: VERSION,
  plural: SANDBOXRUN_PLURAL,
  namespace: ns,
});

async function session(): Promise<string> {
  const created = await viaA.callTool('create_session', { language: 'python' });
  expect(created.isError ?? false, text(created)).toBe(false);
  const s = String(sc(created).session);
  const init = await viaA.callTool('execute_code', { session: s, code: 'calls = []' });
  expect(sc(init), text(init)).toMatchObject({ phase: 'Succeeded' });
  return s;
}

/** A SandboxRun in the session, as kubectl would create it; resolves with its terminal status (`seen`: each status read before). */
async function sessionRun(s: string, code: string, seen: Array<SandboxRun['status']> = []): Promise<NonNullable<SandboxRun['status']>> {
  const body = {
    apiVersion: API_VERSION,
    kind: SANDBOXRUN_KIND,
    metadata: { generateName: 'in-busy-' },
    spec: { session: s, language: 'python', code, timeoutSeconds: 60 },
  };
  const name = String(((await k.custom.createNamespacedCustomObject({ ...api(), body })) as SandboxRun).metadata.name);
  let status: SandboxRun['status'];
  await until(
    async () => {
      status = ((await k.custom.getNamespacedCustomObject({ ...api(), name })) as SandboxRun).status;
      if (isTerminalPhase(status?.phase)) return true;
      seen.push(status);
      return false;
    },
    120_000,
    `SandboxRun ${name} to finish`,
  );
  return status ?? {};
}

describe('a busy session', () => {
  it('runs the calls that arrive meanwhile once each, in turn, through either replica or as SandboxRuns', async () => {
    const s = await session();
    // The first call holds the session for 3 s; the others arrive while it runs.
    const first = viaA.callTool('execute_code', { session: s, code: 'import time\ncalls.append("first")\ntime.sleep(3)\nlen(calls)' });
    await new Promise((r) => setTimeout(r, 500));
    const append = (id: string): string => `calls.append(${JSON.stringify(id)})\nlen(calls)`;
    const [firstR, b1, a1, b2, run] = await Promise.all([
      first,
      viaB.callTool('execute_code', { session: s, code: append('b1') }),
      viaA.callTool('execute_code', { session: s, code: append('a1') }),
      viaB.callTool('execute_code', { session: s, code: append('b2') }),
      sessionRun(s, 'calls.append("k")\nprint(len(calls))'),
    ]);
    for (const r of [firstR, b1, a1, b2]) expect(sc(r), text(r)).toMatchObject({ phase: 'Succeeded' });
    expect(run, JSON.stringify(run)).toMatchObject({ phase: 'Succeeded' });
    expect(sc(firstR).result).toBe('1');
    // Each ran once, after the first, at the position it saw.
    const positions = [b1, a1, b2].map((r) => Number(sc(r).result)).concat(Number(run.stdout));
    expect([...positions].sort()).toEqual([2, 3, 4, 5]);
    // The three MCP calls waited (the SandboxRun too, on whichever replica executed it).
    expect(await waits('ran')).toBeGreaterThanOrEqual(3);
    const all = await viaB.callTool('execute_code', { session: s, code: 'sorted(calls)' });
    expect(sc(all).result).toBe("['a1', 'b1', 'b2', 'first', 'k']");
  }, 300_000);

  it('ends a call still waiting when its allowance is over with SessionBusy, and never runs it', async () => {
    const s = await session();
    const long = viaA.callTool('execute_code', { session: s, code: `import time\ntime.sleep(${WAIT_SECONDS + 8})\n"done"`, timeout_seconds: 60 });
    await new Promise((r) => setTimeout(r, 500));
    const waiting: Array<SandboxRun['status']> = [];
    const [viaMcp, run] = await Promise.all([
      viaB.callTool('execute_code', { session: s, code: 'calls.append("late call")' }),
      sessionRun(s, 'calls.append("late run")', waiting),
    ]);
    // While it waited its turn its status said where its code runs, not that a pod of its own is ready.
    const running = waiting.find((x) => x?.phase === 'Running');
    const inSession = `The code runs in session ${s} once it is ready and any call running there has finished.`;
    expect(running, JSON.stringify(running ?? waiting[0])).toMatchObject({
      message: inSession,
      conditions: expect.arrayContaining([expect.objectContaining({ type: 'Ready', status: 'True', message: inSession })]),
    });
    expect(viaMcp.isError, text(viaMcp)).toBe(true);
    expect(text(viaMcp)).toMatch(
      new RegExp(`Session ${s} was running another call for all of the ${WAIT_SECONDS} s this call could wait; this call did not run`),
    );
    expect(run, JSON.stringify(run)).toMatchObject({ phase: 'Failed', reason: 'SessionBusy' });
    expect(run.message).toMatch(/was running another call for all of the \d+ s this call could wait; this call did not run/);
    expect(sc(await long)).toMatchObject({ phase: 'Succeeded', result: "'done'" });
    // Operators see it: B's MCP call gave up at its deadline (the SandboxRun's replica too).
    expect(await waits('deadline')).toBeGreaterThanOrEqual(2);
    // Neither ever ran, then or later.
    const after = await viaA.callTool('execute_code', { session: s, code: 'calls' });
    expect(sc(after).result).toBe('[]');
  }, 300_000);

  it('bounds a session whose own code makes its kernel answer busy to everything, and leaves other sessions alone', async () => {
    const hostile = await session();
    const other = await session();
    // The session's code owns its kernel process: from now on every call is answered "busy".
    const takeover = [
      'import sys',
      "S = sys.modules['codemode_kernel.server']",
      "srv = next(o for o in __import__('gc').get_objects() if type(o).__name__ == 'KernelServer')",
      'real = srv._dispatch',
      "srv._dispatch = lambda conn, msg: conn.send(dict(S.busy_result(), id=msg['id'], type='result')) if msg.get('op') in ('exec', 'run') else real(conn, msg)",
    ].join('\n');
    expect(sc(await viaA.callTool('execute_code', { session: hostile, code: takeover }))).toMatchObject({ phase: 'Succeeded' });
    const calls = Array.from({ length: 18 }, (_, i) => viaA.callTool('execute_code', { session: hostile, code: `calls.append(${i})` }));
    // Meanwhile another session on the same replica is served as usual.
    expect(sc(await viaA.callTool('execute_code', { session: other, code: '6 * 7' }))).toMatchObject({ phase: 'Succeeded', result: '42' });
    const answers = (await Promise.all(calls)).map((r) => [r.isError, text(r)] as const);
    expect(answers.every(([isError]) => isError === true)).toBe(true);
    // One asks, 16 wait until the allowance is over, the rest are refused at once.
    expect(answers.filter(([, t]) => /16 more are waiting for it; this call did not run/.test(t)).length).toBeGreaterThanOrEqual(1);
    expect(
      answers.filter(([, t]) => new RegExp(`for all of the ${WAIT_SECONDS} s this call could wait; this call did not run`).test(t)).length,
    ).toBeGreaterThanOrEqual(1);
    expect(await waits('full')).toBeGreaterThanOrEqual(1);
    expect(sc(await viaB.callTool('execute_code', { session: other, code: '6 * 7' }))).toMatchObject({ phase: 'Succeeded', result: '42' });
  }, 300_000);
});

describe('a node session held by code an earlier call left running', () => {
  // A Node kernel reads its socket only between stretches of synchronous code: a timer an earlier
  // call armed can hold it with no call running, and a replica opening a stream gets no answer at
  // all. The caller is told that, and what to do, not that another call was running.
  it('ends a call that waited for it with SessionBusy saying so, and serves calls once the code is done', async () => {
    const created = await viaA.callTool('create_session', { language: 'node' });
    expect(created.isError ?? false, text(created)).toBe(false);
    const s = String(sc(created).session);
    const armed = await viaA.callTool('execute_code', {
      session: s,
      code: "setTimeout(() => { const end = Date.now() + 25000; while (Date.now() < end); }, 300)\n'armed'",
    });
    expect(sc(armed), text(armed)).toMatchObject({ phase: 'Succeeded', result: "'armed'" });
    const started = Date.now();
    await new Promise((r) => setTimeout(r, 1000));
    const held = await viaB.callTool('execute_code', { session: s, code: '1 + 1' });
    expect(held.isError, text(held)).toBe(true);
    expect(text(held)).toMatch(
      new RegExp(
        `Session ${s} did not answer for all of the ${WAIT_SECONDS} s this call could wait: .*code an earlier call left running.*this call did not run`,
      ),
    );
    expect(text(held)).toMatch(/Close the session \(close_session\)/);
    await new Promise((r) => setTimeout(r, Math.max(0, started + 27_000 - Date.now())));
    expect(sc(await viaB.callTool('execute_code', { session: s, code: '1 + 1' }))).toMatchObject({ phase: 'Succeeded', result: '2' });
  }, 300_000);

  // Held for longer than the longest call so far may run (its timeout, 2 s here, + the 2 s grace),
  // the kernel's watchdog stops it the only way there is, with the interpreter: the session is
  // lost, and says so, where before it stayed held (and took its CPU) until the code gave up.
  it('is lost once the code holds it longer than its longest call may run', async () => {
    const created = await viaA.callTool('create_session', { language: 'node' });
    expect(created.isError ?? false, text(created)).toBe(false);
    const s = String(sc(created).session);
    const armed = await viaA.callTool('execute_code', { session: s, timeout_seconds: 2, code: "setTimeout(() => { for (;;); }, 300)\n'armed'" });
    expect(sc(armed), text(armed)).toMatchObject({ phase: 'Succeeded', result: "'armed'" });
    const status = async (): Promise<SandboxSession['status']> =>
      ((await k.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: SANDBOXSESSION_PLURAL, name: s })) as SandboxSession)
        .status;
    await until(async () => (await status())?.phase === 'Lost', 60_000, 'the held session lost');
    expect((await status())?.message).toBe(KILLED_INTERPRETER_MESSAGE);
    const after = await viaB.callTool('execute_code', { session: s, code: '1 + 1' });
    expect(after.isError, text(after)).toBe(true);
    expect(text(after)).toMatch(/Create a new session/);
  }, 120_000);
});

describe('sessions this replica has not seen', () => {
  /** Session reads the API server refused as not found, by replica A's own clients. */
  async function notFoundReads(): Promise<number> {
    const text = (await a.metrics?.registry.metrics()) ?? '';
    return Number(/codemode_kube_api_requests_total\{verb="GET",result="not_found"\} (\d+)/.exec(text)?.[1] ?? 0);
  }

  it('reads a session made through the other replica at once, but not one API read per made-up name', async () => {
    const created = await viaB.callTool('create_session', { language: 'python' });
    expect(created.isError ?? false, text(created)).toBe(false);
    expect(sc(await viaA.callTool('execute_code', { session: String(sc(created).session), code: '1 + 1' }))).toMatchObject({
      phase: 'Succeeded',
      result: '2',
    });
    const before = await notFoundReads();
    const started = performance.now();
    const calls = 100;
    for (let i = 0; i < calls; i++) {
      const r = await viaA.callTool('execute_code', { session: `made-up-${i}`, code: 'print(1)' });
      expect(text(r)).toContain('There is no session');
    }
    const seconds = (performance.now() - started) / 1000;
    const reads = (await notFoundReads()) - before;
    // The caller's bucket of session reads (src/sessions/service.ts): 20 at once, then 10 a second (and 5 for the
    // replica's other reads meanwhile).
    expect(reads).toBeLessThanOrEqual(20 + Math.ceil(10 * seconds) + 5);
    expect(reads).toBeLessThan(calls);
  });
});
