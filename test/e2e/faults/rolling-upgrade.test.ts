// Fault (g): a rolling upgrade from one version to another under load. The new replica ships other
// session kernels (another runtime hash: its own runtime ConfigMap and pool version) and another
// sandbox CPU request (another pool-pod template); it joins during the mix, then the old replica
// gets SIGTERM as a Deployment's rolling update sends it. Both serve side by side for a while, each
// claiming only pool pods of its own version; the sessions the old version started are served by
// the new one afterwards. Every call sent to the old replica must be answered, no run repeated or
// left open (helpers/verdict.ts), and afterwards no unclaimed pool pod of the old version is left.
import type { V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ANNOTATION_EXECUTOR } from '../../../src/api/v1alpha1/index.js';
import { runtimeConfigMapName } from '../../../src/sandbox/runtime-configmap.js';
import { createNamespace, deleteNamespace, testKube, until } from '../helpers/kube.js';
import { freePort, gatewayEnv, startGateway, stopGateway, type GatewayProcess } from './helpers/gateway-process.js';
import { Mix } from './helpers/mix.js';
import { RUNTIME_VARIANT_ENV, runtimeFiles } from './helpers/runtime-variant.js';
import { listRuns, PodLedger, verdict } from './helpers/verdict.js';

const k = testKube();
// Start-up allowance as in production-like settings: this test needs every run to succeed.
const STARTUP_SECONDS = 60;
/** How long calls still reach the stopping replica (kube-proxy learning the endpoint change). */
const ENDPOINT_LAG_MS = 1500;
let ns = '';
let ledger: PodLedger;
let oldReplica: GatewayProcess | undefined;
let newReplica: GatewayProcess | undefined;
let mix: Mix | undefined;

beforeAll(async () => {
  ns = await createNamespace(k, 'fault-upgrade');
  ledger = new PodLedger(k, ns);
  await ledger.start();
});
afterAll(async () => {
  await mix?.close();
  await stopGateway(newReplica);
  await stopGateway(oldReplica);
  ledger?.stop();
  await deleteNamespace(k, ns);
});

/** Pool pods not being deleted, by the runtime ConfigMap they mount (their kernels' version). */
async function poolPods(runtime: string, state: 'warm' | 'any'): Promise<V1Pod[]> {
  const selector = state === 'warm' ? 'codemode.dev/pool=warm' : 'codemode.dev/pool';
  const pods = (await k.core.listNamespacedPod({ namespace: ns, labelSelector: selector })).items;
  return pods.filter((p) => !p.metadata?.deletionTimestamp && p.spec?.volumes?.some((v) => v.configMap?.name === runtime));
}

describe('fault: a rolling upgrade to another version during the mix', () => {
  it('serves both versions side by side, answers every call sent to the old one and keeps every invariant', { timeout: 540_000 }, async () => {
    const [oldRuntime, newRuntime] = [runtimeConfigMapName(runtimeFiles()), runtimeConfigMapName(runtimeFiles('upgrade'))];
    expect(oldRuntime).not.toBe(newRuntime);
    const env = gatewayEnv(ns, { CODEMODE_POD_STARTUP_TIMEOUT_SECONDS: String(STARTUP_SECONDS) });
    oldReplica = await startGateway(env, await freePort());
    let urls = [oldReplica.url];
    mix = new Mix({ urls: () => urls, transientWorkers: 3, runSleepSeconds: 2, kube: { k, namespace: ns } });
    await mix.start();
    await until(async () => (await poolPods(oldRuntime, 'warm')).length > 0, 120_000, 'a pool pod of the old version');

    newReplica = await startGateway({ ...env, CODEMODE_CPU_REQUEST: '11m', [RUNTIME_VARIANT_ENV]: 'upgrade' }, await freePort());
    const oldUrl = oldReplica.url;
    const newUrl = newReplica.url;
    urls = [oldUrl, newUrl];
    await mix.waitFor((c) => c.url === newUrl && c.kind === 'transient' && c.outcome === 'ok', 'a transient run through the new version');
    // The sessions were started by the old version: the new one serves them too.
    await mix.waitFor((c) => c.url === newUrl && c.kind === 'session' && c.outcome === 'ok', 'a session call through the new version');

    oldReplica.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, ENDPOINT_LAG_MS));
    urls = [newUrl];
    const code = await Promise.race([oldReplica.exited, new Promise((r) => setTimeout(() => r('still running'), 180_000))]);
    expect(code).toBe(0);
    await mix.waitFor((c) => c.kind === 'transient' && c.outcome === 'ok', 'a transient run after the old version left');
    await mix.waitFor((c) => c.kind === 'session' && c.outcome === 'ok', 'a session call after the old version left');
    await mix.waitFor((c) => c.kind === 'session-run' && c.outcome === 'ok', 'a SandboxRun in a session after the old version left');
    // The new version leads now: it keeps a pool of its own version and removes the old one's
    // unclaimed pods (claimed ones belong to their runs and sessions).
    await until(async () => (await poolPods(oldRuntime, 'warm')).length === 0, 120_000, 'no unclaimed pool pod of the old version');
    await until(async () => (await poolPods(newRuntime, 'warm')).length > 0, 120_000, 'a pool pod of the new version');
    await mix.stop();

    const { problems, summary } = await verdict(k, ns, mix, ledger, STARTUP_SECONDS);
    console.log(`rolling-upgrade: ${JSON.stringify(summary)}`);
    expect(problems).toEqual([]);
    // Nothing sent to the old replica, while it served or drained, was dropped or failed.
    expect(mix.records.filter((c) => c.url === oldUrl && c.outcome !== 'ok')).toEqual([]);
    expect(mix.records.filter((c) => c.url === newUrl && c.outcome === 'ok').length).toBeGreaterThan(0);
    // Sessions of the old version live on, with their state, under the new one.
    expect(summary.sessionsSurviving).toBe(mix.sessions.length);
    // Each version ran its transient runs in pods of its own kernels, warm or cold, never the other's.
    const versionOf = new Map([
      [oldReplica.identity, oldRuntime],
      [newReplica.identity, newRuntime],
    ]);
    const mismatched = (await listRuns(k, ns)).flatMap((r) => {
      const want = versionOf.get(r.metadata.annotations?.[ANNOTATION_EXECUTOR] ?? '');
      const got = [...(ledger.runtimes.get(r.metadata.uid ?? '') ?? [])];
      return want !== undefined && got.some((g) => g !== want) ? [`${r.metadata.name}: ${got.join(',')} (executor's ${want})`] : [];
    });
    expect(mismatched).toEqual([]);
    const byVersion = (want: string): number => [...ledger.runtimes.values()].filter((s) => s.has(want)).length;
    expect(byVersion(oldRuntime)).toBeGreaterThan(0);
    expect(byVersion(newRuntime)).toBeGreaterThan(0);
  });
});
