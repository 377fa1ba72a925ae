// Fault (a): the gateway replica is killed with SIGKILL while it executes runs, then a new one
// starts. As soon as the new replica finds the killed one's replica Lease unrenewed (not after the
// runs' whole budget), it records what the killed one could not: a run whose pod is still there
// gets the outcome its pod's kernel kept (the code ran once, and is not run again), as does a run in
// a session from its session's kernel; a run whose pod is gone ends Failed with a reason. Everything else keeps its invariants (helpers/verdict.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ANNOTATION_EXECUTOR, isTerminalPhase } from '../../../src/api/v1alpha1/index.js';
import { EXECUTOR_GONE_MESSAGE } from '../../../src/controller/run-decision.js';
import { createNamespace, deleteNamespace, testKube, until } from '../helpers/kube.js';
import { connect } from '../helpers/operator.js';
import { startEverything, type Everything } from '../helpers/upstream.js';
import { createUpstream, readyOf, upstreamStatus } from '../helpers/upstream-servers.js';
import { freePort, gatewayEnv, metricValue, startGateway, stopGateway, type GatewayProcess } from './helpers/gateway-process.js';
import { createSessionRun, Mix, transientCode } from './helpers/mix.js';
import { listRuns, orphanedBy, PodLedger, verdict } from './helpers/verdict.js';
import { phases, signalBefore } from './helpers/phase.js';
import { tearDown } from './helpers/teardown.js';

const k = testKube();
const STARTUP_SECONDS = 20;
// The longest the fault gateways allow (gatewayEnv: CODEMODE_MAX_TIMEOUT_SECONDS).
const VICTIM_TIMEOUT_SECONDS = 30;
let ns = '';
let ledger: PodLedger;
let gw: GatewayProcess | undefined;
let mix: Mix | undefined;
/** The reference "everything" MCP server, for the victim whose code is in a tool call at the kill. */
let everything: Everything | undefined;

beforeAll(async () => {
  ns = await createNamespace(k, 'fault-kill');
  ledger = new PodLedger(k, ns);
  await ledger.start();
});
afterAll(async () => {
  await tearDown([() => mix?.close(), () => stopGateway(gw), () => everything?.kill(), () => ledger?.stop(), () => deleteNamespace(k, ns)]);
});

describe('fault: gateway SIGKILL mid-run', () => {
  it(
    'records the vanished replica’s runs from their pods (or Failed without one), never runs them again, and keeps every invariant',
    { timeout: 420_000 },
    async () => {
      const phase = phases('gateway-kill');
      const env = gatewayEnv(ns, { CODEMODE_POD_STARTUP_TIMEOUT_SECONDS: String(STARTUP_SECONDS) });
      const port = await freePort();
      gw = await startGateway(env, port);
      const url = gw.url;
      everything = await startEverything();
      await createUpstream(k, ns, 'everything', { url: everything.url });
      await until(async () => readyOf(await upstreamStatus(k, ns, 'everything')).status === 'True', 60_000, 'the upstream Ready');
      mix = new Mix({ urls: () => [url], kube: { k, namespace: ns } });
      phase('the upstream is Ready; starting the mix');
      await mix.start();
      phase('the mix runs');

      // The victims' sessions first: a session can take long to start on a loaded node (31 s once,
      // from the pool drained by the mix), and the transient victims' 20 s must cover only what
      // happens between their start and the kill.
      const heldClient = await connect(url, 'current');
      const heldCreated = await heldClient.callTool('create_session', { language: 'python' });
      const heldSession = String(heldCreated.structuredContent?.session ?? '');
      expect(heldCreated.isError, JSON.stringify(heldCreated.structuredContent)).toBeFalsy();
      // A third victim: a SandboxRun in a session of its own, whose call its session's kernel keeps
      // under the run's uid. Each execution adds one to n: a call run twice would leave 2.
      const owner = await connect(url, 'current');
      const created = await owner.callTool('create_session', { language: 'python' });
      const victimSession = String(created.structuredContent?.session ?? '');
      expect(created.isError, JSON.stringify(created.structuredContent)).toBeFalsy();
      phase('the victims’ sessions are ready');

      // Two victims, certainly in flight when the replica dies (each sleeps 20 s: the victims after
      // them start, and wait for their first output, before the kill; on a loaded node, 8 s let a
      // victim end before it, once). Their long timeout puts their time budget (start-up + timeout
      // + 60 s = 110 s) far beyond the moment the next replica finds the killed one gone (its replica
      // Lease unrenewed for 30 s). The first keeps its pod; the second's pod is deleted right after
      // the kill, so nothing can tell how it ended.
      const victims = await Promise.all(
        ['kept', 'podless'].map(async (which) => {
          const client = await connect(url, 'current');
          const id = `t-victim-${which}-${Date.now()}`;
          const call = client.callTool('execute_code', { code: transientCode(id, 20), timeout_seconds: VICTIM_TIMEOUT_SECONDS }).then(
            () => 'answered',
            () => 'threw',
          );
          return { which, id, client, call, name: '', uid: '' };
        }),
      );
      // A code-mode victim, in a tool call (of 25 s) when the replica dies: the kernel answers it
      // "unavailable" (whether the tool ran is unknown) as soon as the killed replica's exec stream
      // ends, so the code goes on and ends on its own, long before its timeout, and the next
      // replica reads that outcome back. Before, the call waited for the run's timeout.
      const toolsId = `t-victim-tools-${Date.now()}`;
      const toolsClient = await connect(url, 'current');
      let calling!: () => void;
      const inToolCall = new Promise<void>((r) => (calling = r));
      const toolsResult = toolsClient.callTool(
        'execute_code',
        {
          code: `from codemode import mcp, ToolError\nprint("${toolsId} calling", flush=True)\ntry:\n    mcp.everything.trigger_long_running_operation(duration=25, steps=1)\n    print("answered")\nexcept ToolError as e:\n    print(e.kind, "unknown" in str(e))`,
          timeout_seconds: VICTIM_TIMEOUT_SECONDS,
        },
        (p) => p.message?.includes('calling') && calling(),
      );
      const toolsCall = toolsResult.then(
        () => 'answered',
        () => 'threw',
      );
      // A code-mode session call (no SandboxRun: nobody recalls it), whose code makes a tool call
      // 5 s after it starts, after the kill: it waits in the kernel until another call to the
      // session finds the kernel busy, which answers it "not called" (runtime/PROTOCOL.md,
      // "Recall"), so the code ends and that call runs, instead of the session staying busy until
      // the code's timeout.
      const heldId = `t-victim-held-${Date.now()}`;
      const sessionId = `t-victim-session-${Date.now()}`;
      const inSession = await createSessionRun(
        k,
        ns,
        victimSession,
        // 15 s: in flight at the kill, and ended within the start-up allowance (20 s) that the later
        // call in its session waits for a busy session.
        `import time\nn = globals().get("n", 0) + 1\ntime.sleep(15)\nprint("${sessionId}", n)`,
        VICTIM_TIMEOUT_SECONDS,
        'victim-session-',
      );
      phase('the session victim is created');
      const killed = gw.identity;
      await until(
        async () => {
          const runs = await listRuns(k, ns);
          for (const v of victims) {
            const run = runs.find((r) => r.spec.code?.includes(v.id));
            v.name = run?.metadata.name ?? '';
            v.uid = run?.metadata.uid ?? '';
          }
          return [...victims.map((v) => v.name), inSession.metadata.name].every((n) => runs.find((r) => r.metadata.name === n)?.status?.phase === 'Running');
        },
        120_000,
        'the victim runs Running',
      );
      // A session run's Running status is written just before its code goes to the kernel; the
      // code-mode victim's tool call goes out right after its first line of output.
      phase('the victim runs are Running');
      await signalBefore(inToolCall, toolsResult, 'the code-mode victim in its tool call');
      phase('the code-mode victim is in its tool call');
      // Started last, so that its tool call certainly comes after the kill.
      let heldStarted!: () => void;
      const heldCalling = new Promise<void>((r) => (heldStarted = r));
      const heldResult = heldClient.callTool(
        'execute_code',
        {
          session: heldSession,
          code: `import time\nfrom codemode import mcp, ToolError\nprint("${heldId} calling", flush=True)\ntime.sleep(5)\ntry:\n    mcp.everything.echo(message="x")\n    got = "answered"\nexcept ToolError as e:\n    got = e.kind + (" not called" if "not called" in str(e) else "")`,
          timeout_seconds: VICTIM_TIMEOUT_SECONDS,
        },
        (p) => p.message?.includes('calling') && heldStarted(),
      );
      const heldCall = heldResult.then(
        () => 'answered',
        () => 'threw',
      );
      await signalBefore(heldCalling, heldResult, 'the held session call printing its first line');
      phase('the held session call runs');
      await new Promise((r) => setTimeout(r, 1_000));
      gw.kill('SIGKILL');
      await gw.exited;
      phase('the replica is killed');
      const orphaned = await orphanedBy(k, ns, killed);
      const [kept, podless] = victims as [(typeof victims)[number], (typeof victims)[number]];
      // Said on a failure: how the victim's run looked after the kill (ended before it: the test's timing).
      const atKill = await listRuns(k, ns);
      const seen = (name: string): string => JSON.stringify(atKill.find((r) => r.metadata.name === name)?.status?.phase ?? 'gone');
      for (const v of victims) expect(orphaned.has(v.name), `the ${v.which} victim ${v.name}: ${seen(v.name)}`).toBe(true);
      const toolsRun = (await listRuns(k, ns)).find((r) => r.spec.code?.includes(toolsId));
      expect(orphaned.has(toolsRun?.metadata.name ?? '')).toBe(true);
      // Its client's call streams progress, which the client SDK would try to resume for as long
      // as its timeout: closing the client ends it.
      await toolsClient.close().catch(() => undefined);
      expect(await toolsCall).toBe('threw');
      phase('the code-mode victim’s call ended');
      await heldClient.close().catch(() => undefined);
      expect(await heldCall).toBe('threw');
      phase('the held session call ended');
      expect(orphaned.has(inSession.metadata.name)).toBe(true);
      await owner.close().catch(() => undefined);
      for (const v of victims) expect(await v.call).toBe('threw');
      phase('the transient victims’ calls ended');
      await Promise.all(victims.map((v) => v.client.close().catch(() => undefined)));
      const podlessPods = (await k.core.listNamespacedPod({ namespace: ns })).items.filter((p) =>
        p.metadata?.ownerReferences?.some((o) => o.uid === podless.uid),
      );
      expect(podlessPods.length).toBe(1);
      for (const p of podlessPods) await k.core.deleteNamespacedPod({ namespace: ns, name: p.metadata?.name ?? '', gracePeriodSeconds: 0 });

      phase('the podless victim’s pod is deleted; starting the next replica');
      gw = await startGateway(env, port);
      phase('the next replica is up');
      expect(gw.identity).not.toBe(killed);
      // Another call in the victim's session, made before the new replica can find the killed one
      // gone (that takes 30 s of its own watching): the session's kernel keeps the run's result
      // beside this call's (runtime/PROTOCOL.md, "Recall"), so the run is still read back.
      const later = await connect(gw.url, 'current');
      try {
        const r = await later.callTool('execute_code', { session: victimSession, code: 'later = 1', timeout_seconds: 10 });
        expect(r.structuredContent).toMatchObject({ phase: 'Succeeded' });
      } finally {
        await later.close();
      }
      const victimPhase = (await listRuns(k, ns)).find((r) => r.metadata.name === inSession.metadata.name)?.status?.phase;
      expect(isTerminalPhase(victimPhase), 'the later call came before the recovery').toBe(false);
      // The held session call's code: its tool call was answered "not called" when this call found
      // the session busy, and this call ran right after it.
      phase('the later call in the victim’s session ran');
      const heldLater = await connect(gw.url, 'current');
      try {
        const r = await heldLater.callTool('execute_code', { session: heldSession, code: 'print(got)', timeout_seconds: 10 });
        expect(r.structuredContent, JSON.stringify(r.content)).toMatchObject({ phase: 'Succeeded', stdout: 'unavailable not called\n' });
      } finally {
        await heldLater.close();
      }
      phase('the held session’s later call ran');
      await mix.waitFor((r) => r.kind === 'transient' && r.outcome === 'ok', 'transient run after the restart');
      await mix.waitFor((r) => r.kind === 'session' && r.outcome === 'ok', 'session call after the restart');
      phase('the mix recovered; stopping it');
      await mix.stop();
      phase('the mix stopped; judging');

      const { problems, summary } = await verdict(k, ns, mix, ledger, STARTUP_SECONDS, orphaned);
      console.log(`gateway-kill: ${JSON.stringify(summary)}`);
      expect(problems).toEqual([]);
      const runs = await listRuns(k, ns);
      const budgetEnd = (name: string): number =>
        Date.parse(runs.find((r) => r.metadata.name === name)?.metadata.creationTimestamp ?? '') + (STARTUP_SECONDS + VICTIM_TIMEOUT_SECONDS + 60) * 1000;
      // The run whose pod was kept: its outcome as its code left it, read back from the pod's kernel
      // (its output counts one execution), recorded well before its budget ran out, and said so.
      const k1 = runs.find((r) => r.metadata.name === kept.name);
      expect(k1?.status, JSON.stringify(k1?.status)).toMatchObject({ phase: 'Succeeded', reason: 'Succeeded', exitCode: 0, stdout: `${kept.id} 1\n` });
      expect(Date.parse(k1?.status?.completionTime ?? '')).toBeLessThan(budgetEnd(kept.name));
      expect(ledger.count(kept.uid)).toBe(1);
      const events = await k.core.listNamespacedEvent({ namespace: ns, fieldSelector: `involvedObject.name=${kept.name}` });
      expect(events.items.map((e) => e.reason)).toContain('Recovered');
      // The code-mode run: its code ended on its own once its tool call was answered, and the
      // outcome it left was read back (not TimedOut, as when the call waited for the timeout).
      const t1 = runs.find((r) => r.metadata.name === toolsRun?.metadata.name);
      expect(t1?.status, JSON.stringify(t1?.status)).toMatchObject({
        phase: 'Succeeded',
        reason: 'Succeeded',
        stdout: `${toolsId} calling\nunavailable True\n`,
      });
      expect(ledger.count(toolsRun?.metadata.uid ?? '')).toBe(1);
      // The run in a session: its outcome read back from the session's kernel, and the session
      // kept the state that one execution made.
      const s1 = runs.find((r) => r.metadata.name === inSession.metadata.name);
      expect(s1?.status, JSON.stringify(s1?.status)).toMatchObject({ phase: 'Succeeded', reason: 'Succeeded', stdout: `${sessionId} 1\n` });
      const sessionEvents = await k.core.listNamespacedEvent({ namespace: ns, fieldSelector: `involvedObject.name=${inSession.metadata.name}` });
      expect(sessionEvents.items.map((e) => e.reason)).toContain('Recovered');
      const after = await connect(gw.url, 'current');
      try {
        const state = await after.callTool('execute_code', { session: victimSession, code: 'print(n)', timeout_seconds: 10 });
        expect(state.structuredContent).toMatchObject({ phase: 'Succeeded', stdout: '1\n' });
      } finally {
        await after.close();
      }
      // The run whose pod is gone: Failed because its executor was found gone, also before its budget.
      const p1 = runs.find((r) => r.metadata.name === podless.name);
      expect(isTerminalPhase(p1?.status?.phase)).toBe(true);
      expect(p1?.status, JSON.stringify(p1?.status)).toMatchObject({ phase: 'Failed', reason: 'ExecFailed', message: EXECUTOR_GONE_MESSAGE });
      expect(Date.parse(p1?.status?.completionTime ?? '')).toBeLessThan(budgetEnd(podless.name));
      expect(p1?.metadata.annotations?.[ANNOTATION_EXECUTOR]).not.toBe(undefined);
      expect(ledger.count(podless.uid)).toBeLessThanOrEqual(1);
      // What an operator sees of it: the new replica found one replica that stopped renewing (not an
      // orderly stop), sees itself alone, and counted the run it failed for the killed one.
      const newGw = gw;
      expect(await metricValue(newGw, 'codemode_gateway_replicas_gone_total{how="expired"}')).toBe(1);
      expect(await metricValue(newGw, 'codemode_gateway_replicas_gone_total{how="released"}')).toBe(0);
      expect(await metricValue(newGw, 'codemode_gateway_replicas')).toBe(1);
      expect(await metricValue(newGw, 'codemode_runs_total{phase="Failed",reason="ExecFailed",runtime="python"}')).toBeGreaterThanOrEqual(1);
      // Sessions keep going on the new replica with their state.
      expect(summary.sessionsSurviving).toBe(mix.sessions.length);
    },
  );
});
