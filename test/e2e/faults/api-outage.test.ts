// Fault (b): the API server fails the gateway for ~10 s, three times: first every connection is
// reset (and new ones refused), then every connection stalls (bytes held, then delivered), then
// every write is refused (503, as when its storage cannot store) while reads, watches and exec
// streams go on. Two proxies sit between the replica and the API server: an HTTPS one that can
// refuse writes (helpers/api-write-proxy.ts), in front of a TCP one that resets or stalls
// (helpers/api-proxy.ts). Runs and sessions in flight may fail, each with a reason; none runs
// twice, none stays open. A run or session call whose exec stream broke is answered with its
// outcome all the same, and a run or session call whose ready pod cannot be exec'd for a while
// waits for it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNamespace, deleteNamespace, testKube, until } from '../helpers/kube.js';
import { connect, type TestClient } from '../helpers/operator.js';
import { startApiProxy, type ApiProxy } from './helpers/api-proxy.js';
import { startApiWriteProxy, type ApiWriteProxy } from './helpers/api-write-proxy.js';
import { freePort, gatewayEnv, metricValue, startGateway, stopGateway, type GatewayProcess } from './helpers/gateway-process.js';
import { createSessionRun, Mix } from './helpers/mix.js';
import { listRuns, PodLedger, verdict } from './helpers/verdict.js';
import { startEverything, type Everything } from '../helpers/upstream.js';
import { createUpstream, readyOf, upstreamStatus } from '../helpers/upstream-servers.js';
import { signalBefore } from './helpers/phase.js';
import { tearDown } from './helpers/teardown.js';

const k = testKube();
const STARTUP_SECONDS = 20;
const OUTAGE_MS = 10_000;
let ns = '';
let ledger: PodLedger;
let proxy: ApiProxy | undefined;
let writes: ApiWriteProxy | undefined;
let gw: GatewayProcess | undefined;
let mix: Mix | undefined;
/** The reference "everything" MCP server, for the code-mode test (started by it). */
let everything: Everything | undefined;

beforeAll(async () => {
  ns = await createNamespace(k, 'fault-api');
  ledger = new PodLedger(k, ns);
  await ledger.start();
  proxy = await startApiProxy();
  writes = await startApiWriteProxy(proxy.kubeconfig);
});
afterAll(async () => {
  await tearDown([
    () => proxy?.setMode('pass'),
    () => writes?.setMode('pass'),
    () => mix?.close(),
    () => stopGateway(gw),
    () => writes?.close(),
    () => proxy?.close(),
    () => everything?.kill(),
    () => ledger?.stop(),
    () => deleteNamespace(k, ns),
  ]);
});

/** A new replica (with `env` added), the mix and the last one stopped, behind the write proxy. */
async function restartGateway(env: Record<string, string> = {}): Promise<GatewayProcess> {
  await mix?.close();
  mix = undefined;
  await stopGateway(gw);
  gw = await startGateway(gatewayEnv(ns, env), await freePort(), (writes as ApiWriteProxy).kubeconfig);
  return gw;
}

const aRunInFlight = async (): Promise<boolean> => (await listRuns(k, ns)).some((r) => r.status?.phase === 'Running');

describe('fault: API server unreachable or refusing writes for the gateway', () => {
  it(
    'resets, stalls, then refuses writes of every API connection for 10 s; no run twice, none left open, sessions keep state',
    { timeout: 540_000 },
    async () => {
      const p = proxy as ApiProxy;
      const w = writes as ApiWriteProxy;
      gw = await startGateway(gatewayEnv(ns, { CODEMODE_POD_STARTUP_TIMEOUT_SECONDS: String(STARTUP_SECONDS) }), await freePort(), w.kubeconfig);
      const url = gw.url;
      mix = new Mix({ urls: () => [url], runSleepSeconds: 2, kube: { k, namespace: ns } });
      await mix.start();

      for (const mode of ['reset', 'stall', 'fail-writes'] as const) {
        await until(aRunInFlight, 120_000, 'a run in flight');
        if (mode === 'fail-writes') w.setMode(mode);
        else p.setMode(mode);
        await new Promise((r) => setTimeout(r, OUTAGE_MS));
        p.setMode('pass');
        w.setMode('pass');
        await mix.waitFor((r) => r.kind === 'transient' && r.outcome === 'ok', `a transient run after the ${mode}`);
        await mix.waitFor((r) => r.kind === 'session' && r.outcome === 'ok', `a session call after the ${mode}`);
        await mix.waitFor((r) => r.kind === 'session-run' && r.outcome === 'ok', `a SandboxRun in a session after the ${mode}`);
      }
      // The write fault happened: the replica's writes were refused while its reads went on.
      expect(w.refused()).toBeGreaterThan(0);
      await mix.stop();

      const { problems, summary } = await verdict(k, ns, mix, ledger, STARTUP_SECONDS);
      console.log(`api-outage: ${JSON.stringify({ ...summary, writesRefused: w.refused() })}`);
      expect(problems).toEqual([]);
      expect(summary.sessionsSurviving).toBe(mix.sessions.length);
      // An unreachable API server is named as such, not reported as the operator's internal error.
      expect(mix.records.filter((c) => /internal error/.test(c.detail)).map((c) => c.detail)).toEqual([]);
    },
  );

  it('answers a call whose create got no answer once its timeout passed, while the API is still unreachable', { timeout: 240_000 }, async () => {
    const p = proxy as ApiProxy;
    // No pool: the code cannot start before its run exists, so nothing of it can be running.
    const client = await connect((await restartGateway({ CODEMODE_WARM_POOL_MIN: '0', CODEMODE_WARM_POOL_MAX: '0' })).url, 'current');
    try {
      p.setMode('reset');
      const r = await client.callTool('execute_code', { code: 'print(1)', timeout_seconds: 2 });
      // Answered with the proxy still refusing every connection (the client gives up after 120 s).
      const text = r.content.map((c) => c.text ?? '').join('\n');
      expect(r.isError, text).toBe(true);
      expect(text).toMatch(/did not say whether SandboxRun \S+ was created/);
      expect(text).toMatch(/kubectl get sandboxrun \S+ -n /);
    } finally {
      p.setMode('pass');
      await client.close();
    }
  });

  // The kernel runs the code to its end whatever happens to the stream, and keeps the result: the
  // replica asks for it again once it can reach the pod (src/runs/in-pod.ts recallAfterBreak).
  it('answers a run whose exec stream broke mid-run with its whole outcome, read back from its pod', { timeout: 240_000 }, async () => {
    const p = proxy as ApiProxy;
    const client = await connect((await restartGateway()).url, 'current');
    try {
      const id = `t-broken-stream-${Date.now()}`;
      const code = `import time\nprint("before", flush=True)\ntime.sleep(4)\nprint(${JSON.stringify(id)})`;
      // The break must come while the code sleeps, which its first output shows. Its Running status
      // does not: on a cold pod it is written while the stream to the kernel may still be opening,
      // and a break then rightly ends the run "did not start" (it happened once in CI).
      let printed!: () => void;
      const sleeping = new Promise<void>((r) => (printed = r));
      const call = client.callTool('execute_code', { code, timeout_seconds: 20 }, (p) => p.message?.includes('before') && printed());
      await signalBefore(sleeping, call, 'the code printing its first line');
      const name = (await listRuns(k, ns)).find((r) => r.spec.code?.includes(id))?.metadata.name ?? '';
      // Every API connection of the replica, its exec stream to the kernel among them, is reset,
      // and new ones are refused for 2 s while the code sleeps.
      p.setMode('reset');
      await new Promise((r) => setTimeout(r, 2_000));
      p.setMode('pass');
      const r = await call;
      expect(r.isError, JSON.stringify(r.structuredContent)).toBeFalsy();
      expect(r.structuredContent).toMatchObject({ phase: 'Succeeded', exit_code: 0, stdout: `before\n${id}\n` });
      await until(async () => (await listRuns(k, ns)).find((x) => x.metadata.name === name)?.status?.phase === 'Succeeded', 60_000, 'the run recorded');
      const run = (await listRuns(k, ns)).find((x) => x.metadata.name === name);
      expect(run?.status).toMatchObject({ phase: 'Succeeded', stdout: `before\n${id}\n` });
      // One pod ever carried it: the code ran once.
      expect(ledger.count(run?.metadata.uid ?? '')).toBe(1);
      // What an operator sees of it.
      expect(await metricValue(gw as GatewayProcess, 'codemode_kernel_stream_breaks_total{path="run",outcome="recalled"}')).toBe(1);
      expect(await metricValue(gw as GatewayProcess, 'codemode_kernel_stream_breaks_total{path="run",outcome="unknown"}')).toBe(0);
    } finally {
      p.setMode('pass');
      await client.close();
    }
  });

  // A run whose pod is ready while it cannot be reached (every exec refused, as during an API
  // server or kubelet restart) waits for it instead of failing: nothing of its code was sent, so
  // trying again cannot run it twice (src/runs/in-pod.ts untilOpened). A python run's cold pod
  // runs the kernel; bash given an image other than python's has none (as in codemode-cold), and
  // the runner script is exec'd with the code.
  it.each([
    ['python', 'the kernel', {}, (id: string) => `print(${JSON.stringify(id)})`],
    ['bash', 'the runner', { CODEMODE_IMAGE_BASH: 'codemode.local/datascience:v1' }, (id: string) => `echo ${id}`],
  ])("runs a %s call (%s) once whose ready pod could not be exec'd for 5 s", { timeout: 240_000 }, async (language, _path, env, codeFor) => {
    const w = writes as ApiWriteProxy;
    // No pool: the run gets a cold pod of its own, which this replica has not reached yet.
    const client = await connect((await restartGateway({ CODEMODE_WARM_POOL_MIN: '0', CODEMODE_WARM_POOL_MAX: '0', ...env })).url, 'current');
    try {
      const id = `t-exec-refused-${Date.now()}`;
      const refusedBefore = w.execsRefused();
      w.setMode('refuse-exec');
      const call = client.callTool('execute_code', { code: codeFor(id), language, timeout_seconds: 10 });
      // The replica found the pod ready and was refused; the refusals go on for 5 s more.
      await until(async () => w.execsRefused() > refusedBefore, 120_000, 'an exec refused');
      await new Promise((r) => setTimeout(r, 5_000));
      w.setMode('pass');
      const r = await call;
      expect(w.execsRefused()).toBeGreaterThan(refusedBefore + 1);
      expect(r.isError, JSON.stringify(r.structuredContent)).toBeFalsy();
      expect(r.structuredContent).toMatchObject({ phase: 'Succeeded', exit_code: 0, stdout: `${id}\n` });
      const run = (await listRuns(k, ns)).find((x) => x.spec.code?.includes(id));
      // One pod ever carried it: the code ran once.
      expect(ledger.count(run?.metadata.uid ?? '')).toBe(1);
    } finally {
      w.setMode('pass');
      await client.close();
    }
  });

  // An exec the API server answers 500 (it cannot dial a kubelet that is restarting) reached
  // nothing (src/exec/kernel.ts: such an answer is "unreachable"). A session call that needs a new
  // stream waits for it (src/exec/open-wait.ts, at most 30 s): it runs once when the answers come
  // back, and otherwise did not run. Either way its session, whose kernel is alive, keeps its state.
  const increment = 'n = globals().get("n", 0) + 1\nprint(n)';
  /** A session that ran `increment` once, and a client of a new replica, which has no stream open to its kernel. */
  async function sessionOnNewReplica(): Promise<{ client: TestClient; session: string }> {
    const first = await connect((await restartGateway()).url, 'current');
    try {
      const created = await first.callTool('create_session', { language: 'python' });
      expect(created.isError, JSON.stringify(created.structuredContent)).toBeFalsy();
      const session = String(created.structuredContent?.session);
      const r = await first.callTool('execute_code', { session, code: increment, timeout_seconds: 10 });
      expect(r.structuredContent).toMatchObject({ phase: 'Succeeded', stdout: '1\n' });
      return { client: await connect((await restartGateway()).url, 'current'), session };
    } finally {
      await first.close();
    }
  }

  it("runs a session call once whose kernel could not be exec'd (500) for 5 s", { timeout: 240_000 }, async () => {
    const w = writes as ApiWriteProxy;
    const { client, session } = await sessionOnNewReplica();
    try {
      const refusedBefore = w.execsRefused();
      w.setMode('fail-exec');
      const call = client.callTool('execute_code', { session, code: increment, timeout_seconds: 10 });
      await until(async () => w.execsRefused() > refusedBefore, 60_000, 'an exec answered 500');
      await new Promise((r) => setTimeout(r, 5_000));
      w.setMode('pass');
      const r = await call;
      expect(w.execsRefused()).toBeGreaterThan(refusedBefore + 1);
      expect(r.isError, JSON.stringify(r.structuredContent)).toBeFalsy();
      expect(r.structuredContent).toMatchObject({ phase: 'Succeeded', stdout: '2\n' });
      // It ran once: the session holds both calls' state, no more.
      const after = await client.callTool('execute_code', { session, code: 'print(n)', timeout_seconds: 10 });
      expect(after.structuredContent).toMatchObject({ phase: 'Succeeded', stdout: '2\n' });
    } finally {
      w.setMode('pass');
      await client.close();
    }
  });

  it(
    "keeps a session whose kernel could not be exec'd (500) for longer than a call waits: the call did not run, the state is there",
    { timeout: 240_000 },
    async () => {
      const w = writes as ApiWriteProxy;
      const { client, session } = await sessionOnNewReplica();
      try {
        const refusedBefore = w.execsRefused();
        w.setMode('fail-exec');
        const refused = await client.callTool('execute_code', { session, code: increment, timeout_seconds: 10 });
        w.setMode('pass');
        expect(w.execsRefused()).toBeGreaterThan(refusedBefore + 1);
        const text = refused.content.map((c) => c.text ?? '').join('\n');
        expect(refused.isError, text).toBe(true);
        expect(text).toMatch(/could not be reached.*The code did not run; the session keeps its state/s);
        // The session is not Lost, and holds the state of the first call only.
        const after = await client.callTool('execute_code', { session, code: 'print(n)', timeout_seconds: 10 });
        expect(after.structuredContent).toMatchObject({ phase: 'Succeeded', stdout: '1\n' });
      } finally {
        w.setMode('pass');
        await client.close();
      }
    },
  );

  // A call in a session is sent with a key of its own, and its kernel keeps its result the same
  // way: the replica reads it back over a new stream (src/sessions/service.ts). The session keeps
  // the state the call made, once: an MCP call and a SandboxRun in a session, both mid-call.
  it('answers calls in sessions whose exec streams broke mid-call with their outcomes; the state they made is there once', { timeout: 240_000 }, async () => {
    const p = proxy as ApiProxy;
    const client = await connect((await restartGateway()).url, 'current');
    try {
      const sessions: string[] = [];
      for (let i = 0; i < 2; i++) {
        const created = await client.callTool('create_session', { language: 'python' });
        expect(created.isError, JSON.stringify(created.structuredContent)).toBeFalsy();
        sessions.push(String(created.structuredContent?.session));
      }
      const [viaMcp, viaRun] = sessions as [string, string];
      // Each execution adds one to n: a call that ran twice would leave 2.
      const code = (id: string): string => `import time\nn = globals().get("n", 0) + 1\nprint("before", flush=True)\ntime.sleep(5)\nprint("${id}", n)`;
      const mcpId = `s-broken-${Date.now()}`;
      const runId = `r-broken-${Date.now()}`;
      const call = client.callTool('execute_code', { session: viaMcp, code: code(mcpId), timeout_seconds: 30 });
      const run = await createSessionRun(k, ns, viaRun, code(runId), 30, 'broken-stream-');
      // The run's Running status is written just before its code goes to the kernel, over a
      // stream already open (the MCP call's went out before the run was created): a second later
      // both codes sleep, and both streams carry a call when they break.
      await until(
        async () => (await listRuns(k, ns)).find((x) => x.metadata.name === run.metadata.name)?.status?.phase === 'Running',
        60_000,
        'the run Running',
      );
      await new Promise((r) => setTimeout(r, 1_000));
      p.setMode('reset');
      await new Promise((r) => setTimeout(r, 2_000));
      p.setMode('pass');
      const r = await call;
      expect(r.isError, JSON.stringify(r.structuredContent)).toBeFalsy();
      expect(r.structuredContent).toMatchObject({ phase: 'Succeeded', stdout: `before\n${mcpId} 1\n` });
      await until(
        async () => ['Succeeded', 'Failed'].includes(String((await listRuns(k, ns)).find((x) => x.metadata.name === run.metadata.name)?.status?.phase)),
        90_000,
        'the SandboxRun ended',
      );
      expect((await listRuns(k, ns)).find((x) => x.metadata.name === run.metadata.name)?.status).toMatchObject({
        phase: 'Succeeded',
        stdout: `before\n${runId} 1\n`,
      });
      expect(await metricValue(gw as GatewayProcess, 'codemode_kernel_stream_breaks_total{path="session",outcome="recalled"}')).toBe(2);
      expect(await metricValue(gw as GatewayProcess, 'codemode_kernel_stream_breaks_total{path="session",outcome="unknown"}')).toBe(0);
      // Each session kept its state, and each call ran once.
      for (const session of sessions) {
        const after = await client.callTool('execute_code', { session, code: 'print(n)', timeout_seconds: 10 });
        expect(after.structuredContent).toMatchObject({ phase: 'Succeeded', stdout: '1\n' });
      }
    } finally {
      p.setMode('pass');
      await client.close();
    }
  });

  // Code mode through a broken stream: the code's tool calls go on over the stream that recalls
  // its call (runtime/PROTOCOL.md, "Recall"). A transient run and a session call each call the
  // reference "everything" server (a real MCP server, reached directly, not through the proxy)
  // before and after their streams broke.
  it('lets code go on calling tools after its exec stream broke: a run and a session call', { timeout: 240_000 }, async () => {
    const p = proxy as ApiProxy;
    everything = await startEverything();
    await createUpstream(k, ns, 'everything', { url: everything.url });
    const client = await connect((await restartGateway()).url, 'current');
    try {
      await until(async () => readyOf(await upstreamStatus(k, ns, 'everything')).status === 'True', 60_000, 'the upstream Ready');
      const created = await client.callTool('create_session', { language: 'python' });
      expect(created.isError, JSON.stringify(created.structuredContent)).toBeFalsy();
      const session = String(created.structuredContent?.session);
      // The second call comes while the stream is broken (then the kernel holds it) or after the
      // replica recalled the call (then it goes over the new stream): either way it is answered.
      const code = (id: string): string =>
        `import time\nfrom codemode import mcp\nfirst = mcp.everything.echo(message="one")\nprint("before", flush=True)\ntime.sleep(6)\nprint(first, mcp.everything.echo(message="${id}"))`;
      const runId = `r-tools-${Date.now()}`;
      const sessionId = `s-tools-${Date.now()}`;
      const inSession = client.callTool('execute_code', { session, code: code(sessionId), timeout_seconds: 30 });
      const transient = client.callTool('execute_code', { code: code(runId), timeout_seconds: 30 });
      await until(async () => (await listRuns(k, ns)).find((r) => r.spec.code?.includes(runId))?.status?.phase === 'Running', 60_000, 'the run Running');
      // Both have made their first call and sleep when their streams break.
      await new Promise((r) => setTimeout(r, 1_500));
      p.setMode('reset');
      await new Promise((r) => setTimeout(r, 2_000));
      p.setMode('pass');
      for (const [r, id] of [
        [await transient, runId],
        [await inSession, sessionId],
      ] as const) {
        expect(r.isError, JSON.stringify(r.structuredContent)).toBeFalsy();
        // Both calls through the call's own broker: its count and budget carry on after the break.
        expect(r.structuredContent).toMatchObject({ phase: 'Succeeded', stdout: `before\nEcho: one Echo: ${id}\n`, tool_calls: { calls: 2, errors: 0 } });
      }
      expect(await metricValue(gw as GatewayProcess, 'codemode_kernel_stream_breaks_total{path="run",outcome="recalled"}')).toBe(1);
      expect(await metricValue(gw as GatewayProcess, 'codemode_kernel_stream_breaks_total{path="session",outcome="recalled"}')).toBe(1);
    } finally {
      p.setMode('pass');
      await client.close();
    }
  });
});
