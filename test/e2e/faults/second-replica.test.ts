// Fault (d): a second gateway replica joins during the mix (both serve, both claim runs and pool
// pods, one leads), then gets SIGTERM as in a rolling upgrade. Calls keep arriving at it for a
// moment, as while a Service's endpoints update: every call sent to it must be answered, it must
// exit by itself, and no run may be repeated or left open (helpers/verdict.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ANNOTATION_EXECUTOR } from '../../../src/api/v1alpha1/index.js';
import { createNamespace, deleteNamespace, testKube, until } from '../helpers/kube.js';
import { freePort, gatewayEnv, metricValue, startGateway, stopGateway, type GatewayProcess } from './helpers/gateway-process.js';
import { Mix } from './helpers/mix.js';
import { listRuns, PodLedger, replicaLeaseHolders, verdict } from './helpers/verdict.js';
import { tearDown } from './helpers/teardown.js';

const k = testKube();
// Start-up allowance as in production-like settings: this test needs every run to succeed.
const STARTUP_SECONDS = 60;
/** How long calls still reach the stopping replica (kube-proxy learning the endpoint change). */
const ENDPOINT_LAG_MS = 1500;
let ns = '';
let ledger: PodLedger;
let a: GatewayProcess | undefined;
let b: GatewayProcess | undefined;
let mix: Mix | undefined;

beforeAll(async () => {
  ns = await createNamespace(k, 'fault-replica');
  ledger = new PodLedger(k, ns);
  await ledger.start();
});
afterAll(async () => {
  await tearDown([() => mix?.close(), () => stopGateway(b), () => stopGateway(a), () => ledger?.stop(), () => deleteNamespace(k, ns)]);
});

describe('fault: a second replica started and stopped during the mix', () => {
  it('answers every call sent to the stopping replica, which exits by itself, and keeps every invariant', { timeout: 420_000 }, async () => {
    const env = gatewayEnv(ns, { CODEMODE_POD_STARTUP_TIMEOUT_SECONDS: String(STARTUP_SECONDS) });
    a = await startGateway(env, await freePort());
    let urls = [a.url];
    mix = new Mix({ urls: () => urls, transientWorkers: 3, runSleepSeconds: 2, kube: { k, namespace: ns } });
    await mix.start();

    b = await startGateway(env, await freePort());
    const bUrl = b.url;
    urls = [a.url, bUrl];
    await mix.waitFor((c) => c.url === bUrl && c.kind === 'transient' && c.outcome === 'ok', 'a transient run through the second replica');
    await mix.waitFor((c) => c.url === bUrl && c.kind === 'session' && c.outcome === 'ok', 'a session call through the second replica');
    // The first replica sees two replicas up (its lists come every 10 s).
    const first = a;
    await until(async () => (await metricValue(first, 'codemode_gateway_replicas')) === 2, 30_000, 'the first replica counting two replicas');
    // Strike while the second replica executes a run.
    const bIdentity = b.identity;
    await until(
      async () => (await listRuns(k, ns)).some((r) => r.metadata.annotations?.[ANNOTATION_EXECUTOR] === bIdentity && r.status?.phase === 'Running'),
      120_000,
      'a run executing on the second replica',
    );
    b.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, ENDPOINT_LAG_MS));
    urls = [a.url];
    const code = await Promise.race([b.exited, new Promise((r) => setTimeout(() => r('still running'), 180_000))]);
    expect(code).toBe(0);
    // It deleted its replica Lease last, as a clean shutdown does; the first replica keeps its own.
    expect(await replicaLeaseHolders(k, ns)).toEqual([a.identity]);
    // The first replica counts it as an orderly stop, and itself alone again.
    await until(async () => (await metricValue(first, 'codemode_gateway_replicas_gone_total{how="released"}')) === 1, 30_000, 'the stop counted as released');
    expect(await metricValue(first, 'codemode_gateway_replicas_gone_total{how="expired"}')).toBe(0);
    expect(await metricValue(first, 'codemode_gateway_replicas')).toBe(1);
    await mix.waitFor((c) => c.kind === 'transient' && c.outcome === 'ok', 'a transient run after the second replica left');
    await mix.stop();

    const { problems, summary } = await verdict(k, ns, mix, ledger, STARTUP_SECONDS);
    console.log(`second-replica: ${JSON.stringify(summary)}`);
    expect(problems).toEqual([]);
    // Nothing sent to the stopping replica was dropped or failed.
    expect(mix.records.filter((c) => c.url === bUrl && c.outcome !== 'ok')).toEqual([]);
    // Its runs were all recorded by itself before it left (none needed the vanished-executor path).
    const itsRuns = (await listRuns(k, ns)).filter((r) => r.metadata.annotations?.[ANNOTATION_EXECUTOR] === bIdentity);
    expect(itsRuns.length).toBeGreaterThan(0);
    expect(itsRuns.filter((r) => r.status?.phase !== 'Succeeded').map((r) => r.status)).toEqual([]);
    expect(summary.sessionsSurviving).toBe(mix.sessions.length);
  });
});
