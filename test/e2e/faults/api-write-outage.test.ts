// Fault (b'): the API server refuses every write from the gateway for 10 s (503, as when its
// storage is unavailable) while reads, watches and exec streams go on — the run's record, the
// session's status, audit records, pool pods and claims all fail to be written for a while. An
// HTTPS proxy sits between the replica and the API server (helpers/api-write-proxy.ts). Runs and
// sessions in flight may fail, each with a reason; none runs twice, none stays open.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNamespace, deleteNamespace, testKube, until } from '../helpers/kube.js';
import { startApiWriteProxy, type ApiWriteProxy } from './helpers/api-write-proxy.js';
import { freePort, gatewayEnv, startGateway, stopGateway, type GatewayProcess } from './helpers/gateway-process.js';
import { Mix } from './helpers/mix.js';
import { listRuns, PodLedger, verdict } from './helpers/verdict.js';

const k = testKube();
const STARTUP_SECONDS = 20;
const OUTAGE_MS = 10_000;
let ns = '';
let ledger: PodLedger;
let proxy: ApiWriteProxy | undefined;
let gw: GatewayProcess | undefined;
let mix: Mix | undefined;

beforeAll(async () => {
  ns = await createNamespace(k, 'fault-writes');
  ledger = new PodLedger(k, ns);
  await ledger.start();
  proxy = await startApiWriteProxy();
});
afterAll(async () => {
  proxy?.setMode('pass');
  await mix?.close();
  await stopGateway(gw);
  await proxy?.close();
  ledger?.stop();
  await deleteNamespace(k, ns);
});

const aRunInFlight = async (): Promise<boolean> => (await listRuns(k, ns)).some((r) => r.status?.phase === 'Running');

describe('fault: API writes refused for the gateway', () => {
  it('refuses every write for 10 s while reads go on; no run twice, none left open, sessions keep state', { timeout: 420_000 }, async () => {
    const p = proxy as ApiWriteProxy;
    gw = await startGateway(gatewayEnv(ns, { CODEMODE_POD_STARTUP_TIMEOUT_SECONDS: String(STARTUP_SECONDS) }), await freePort(), p.kubeconfig);
    const url = gw.url;
    mix = new Mix({ urls: () => [url], runSleepSeconds: 2, kube: { k, namespace: ns } });
    await mix.start();

    await until(aRunInFlight, 120_000, 'a run in flight');
    p.setMode('fail-writes');
    await new Promise((r) => setTimeout(r, OUTAGE_MS));
    p.setMode('pass');
    // The fault happened: the replica's writes were refused.
    expect(p.refused()).toBeGreaterThan(0);
    await mix.waitFor((r) => r.kind === 'transient' && r.outcome === 'ok', 'a transient run after the outage');
    await mix.waitFor((r) => r.kind === 'session' && r.outcome === 'ok', 'a session call after the outage');
    await mix.waitFor((r) => r.kind === 'session-run' && r.outcome === 'ok', 'a SandboxRun in a session after the outage');
    await mix.stop();

    const { problems, summary } = await verdict(k, ns, mix, ledger, STARTUP_SECONDS);
    console.log(`api-write-outage: ${JSON.stringify({ ...summary, writesRefused: p.refused() })}`);
    expect(problems).toEqual([]);
    expect(summary.sessionsSurviving).toBe(mix.sessions.length);
    // A refused write is named as the API server's, not reported as the operator's internal error.
    expect(mix.records.filter((c) => /internal error/.test(c.detail)).map((c) => c.detail)).toEqual([]);
  });
});
