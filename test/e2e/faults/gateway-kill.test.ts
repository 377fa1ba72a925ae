// Fault (a): the gateway replica is killed with SIGKILL while it executes runs, then a new one
// starts. The run it was executing ends Failed with a reason and never runs again — as soon as the
// new replica finds the killed one's replica Lease unrenewed, not after the run's whole budget;
// everything else keeps its invariants (helpers/verdict.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ANNOTATION_EXECUTOR, isTerminalPhase } from '../../../src/api/v1alpha1/index.js';
import { EXECUTOR_GONE_MESSAGE } from '../../../src/controller/run-decision.js';
import { createNamespace, deleteNamespace, testKube, until } from '../helpers/kube.js';
import { connect } from '../helpers/operator.js';
import { freePort, gatewayEnv, metricValue, startGateway, stopGateway, type GatewayProcess } from './helpers/gateway-process.js';
import { Mix, transientCode } from './helpers/mix.js';
import { listRuns, orphanedBy, PodLedger, verdict } from './helpers/verdict.js';

const k = testKube();
const STARTUP_SECONDS = 20;
// The longest the fault gateways allow (gatewayEnv: CODEMODE_MAX_TIMEOUT_SECONDS).
const VICTIM_TIMEOUT_SECONDS = 30;
let ns = '';
let ledger: PodLedger;
let gw: GatewayProcess | undefined;
let mix: Mix | undefined;

beforeAll(async () => {
  ns = await createNamespace(k, 'fault-kill');
  ledger = new PodLedger(k, ns);
  await ledger.start();
});
afterAll(async () => {
  await mix?.close();
  await stopGateway(gw);
  ledger?.stop();
  await deleteNamespace(k, ns);
});

describe('fault: gateway SIGKILL mid-run', () => {
  it('fails the vanished replica’s run with a reason, never runs it again, and keeps every invariant', { timeout: 420_000 }, async () => {
    const env = gatewayEnv(ns, { CODEMODE_POD_STARTUP_TIMEOUT_SECONDS: String(STARTUP_SECONDS) });
    const port = await freePort();
    gw = await startGateway(env, port);
    const url = gw.url;
    mix = new Mix({ urls: () => [url], kube: { k, namespace: ns } });
    await mix.start();

    // The victim: a run certainly in flight when the replica dies (it sleeps 8 s). Its long
    // timeout puts its time budget (start-up + timeout + 60 s = 110 s) far beyond the moment the
    // next replica finds the killed one gone (its replica Lease unrenewed for 30 s).
    const victimClient = await connect(url, 'current');
    const victimId = `t-victim-${Date.now()}`;
    const victimCall = victimClient.callTool('execute_code', { code: transientCode(victimId, 8), timeout_seconds: VICTIM_TIMEOUT_SECONDS }).then(
      () => 'answered',
      () => 'threw',
    );
    const killed = gw.identity;
    let victim = '';
    await until(
      async () => {
        const run = (await listRuns(k, ns)).find((r) => r.spec.code?.includes(victimId));
        victim = run?.metadata.name ?? '';
        return run?.status?.phase === 'Running';
      },
      120_000,
      'the victim run Running',
    );
    gw.kill('SIGKILL');
    await gw.exited;
    const orphaned = await orphanedBy(k, ns, killed);
    expect(orphaned.has(victim)).toBe(true);
    expect(await victimCall).toBe('threw');
    await victimClient.close().catch(() => undefined);

    gw = await startGateway(env, port);
    expect(gw.identity).not.toBe(killed);
    await mix.waitFor((r) => r.kind === 'transient' && r.outcome === 'ok', 'transient run after the restart');
    await mix.waitFor((r) => r.kind === 'session' && r.outcome === 'ok', 'session call after the restart');
    await mix.stop();

    const { problems, summary } = await verdict(k, ns, mix, ledger, STARTUP_SECONDS, orphaned);
    console.log(`gateway-kill: ${JSON.stringify(summary)}`);
    expect(problems).toEqual([]);
    const v = (await listRuns(k, ns)).find((r) => r.metadata.name === victim);
    expect(isTerminalPhase(v?.status?.phase)).toBe(true);
    // Failed because its executor was found gone, well before its whole time budget ran out.
    expect(v?.status, JSON.stringify(v?.status)).toMatchObject({ phase: 'Failed', reason: 'ExecFailed', message: EXECUTOR_GONE_MESSAGE });
    const budgetEnd = Date.parse(v?.metadata.creationTimestamp ?? '') + (STARTUP_SECONDS + VICTIM_TIMEOUT_SECONDS + 60) * 1000;
    expect(Date.parse(v?.status?.completionTime ?? '')).toBeLessThan(budgetEnd);
    expect(v?.metadata.annotations?.[ANNOTATION_EXECUTOR]).not.toBe(undefined);
    expect(ledger.count(v?.metadata.uid ?? '')).toBeLessThanOrEqual(1);
    // What an operator sees of it: the new replica found one replica that stopped renewing (not an
    // orderly stop), sees itself alone, and counted the runs it failed for the killed one.
    const newGw = gw;
    expect(await metricValue(newGw, 'codemode_gateway_replicas_gone_total{how="expired"}')).toBe(1);
    expect(await metricValue(newGw, 'codemode_gateway_replicas_gone_total{how="released"}')).toBe(0);
    expect(await metricValue(newGw, 'codemode_gateway_replicas')).toBe(1);
    expect(await metricValue(newGw, 'codemode_runs_total{phase="Failed",reason="ExecFailed",runtime="python"}')).toBeGreaterThanOrEqual(1);
    // Sessions keep going on the new replica with their state.
    expect(summary.sessionsSurviving).toBe(mix.sessions.length);
  });
});
