// Fault (g): a rolling upgrade from one version to another under load: the new replica joins during
// the mix, then the old replica gets SIGTERM as a Deployment's rolling update sends it. Both serve
// side by side for a while; the sessions the old version started are served by the new one
// afterwards. Every call sent to the old replica must be answered, no run repeated or left open
// (helpers/verdict.ts). Two upgrades:
// - another sandbox: the new replica ships other session kernels (another runtime hash: its own
//   runtime ConfigMap and pool version) and another sandbox CPU request (another pool-pod
//   template). Each version claims only pool pods of its own, and afterwards no unclaimed pool pod
//   of the old version is left.
// - another gateway: the previous release's code (helpers/release.ts, its own checkout) upgraded to
//   this checkout's, as a release is rolled out.
import type { V1Pod } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ANNOTATION_EXECUTOR } from '../../../src/api/v1alpha1/index.js';
import { runtimeConfigMapName } from '../../../src/sandbox/runtime-configmap.js';
import { createNamespace, deleteNamespace, testKube, until } from '../helpers/kube.js';
import { freePort, gatewayEnv, startGateway, stopGateway, type GatewayProcess } from './helpers/gateway-process.js';
import { Mix } from './helpers/mix.js';
import { PREVIOUS_RELEASE, releaseCheckout } from './helpers/release.js';
import { RUNTIME_VARIANT_ENV, runtimeFiles } from './helpers/runtime-variant.js';
import { listRuns, PodLedger, verdict } from './helpers/verdict.js';
import { tearDown } from './helpers/teardown.js';

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

beforeEach(async () => {
  ns = await createNamespace(k, 'fault-upgrade');
  ledger = new PodLedger(k, ns);
  await ledger.start();
});
afterEach(async () => {
  await tearDown([() => mix?.close(), () => stopGateway(newReplica), () => stopGateway(oldReplica), () => ledger?.stop(), () => deleteNamespace(k, ns)]);
});

/** Pool pods not being deleted, by the runtime ConfigMap they mount (their kernels' version). */
async function poolPods(runtime: string, state: 'warm' | 'any'): Promise<V1Pod[]> {
  const selector = state === 'warm' ? 'codemode.dev/pool=warm' : 'codemode.dev/pool';
  const pods = (await k.core.listNamespacedPod({ namespace: ns, labelSelector: selector })).items;
  return pods.filter((p) => !p.metadata?.deletionTimestamp && p.spec?.volumes?.some((v) => v.configMap?.name === runtime));
}

type Start = (env: Record<string, string>) => Promise<GatewayProcess>;

/**
 * The upgrade under the mix: `startOld` serves, `startNew` joins, the old one is drained. Checks
 * what every upgrade must keep; returns the verdict's summary and both URLs for the rest.
 */
async function upgrade(startOld: Start, startNew: Start): Promise<{ oldUrl: string; newUrl: string }> {
  const env = gatewayEnv(ns, { CODEMODE_POD_STARTUP_TIMEOUT_SECONDS: String(STARTUP_SECONDS) });
  oldReplica = await startOld(env);
  let urls = [oldReplica.url];
  mix = new Mix({ urls: () => urls, transientWorkers: 3, runSleepSeconds: 2, kube: { k, namespace: ns } });
  await mix.start();
  await until(
    async () => (await k.core.listNamespacedPod({ namespace: ns, labelSelector: 'codemode.dev/pool=warm' })).items.length > 0,
    120_000,
    'a pool pod of the old version',
  );

  newReplica = await startNew(env);
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
  await mix.stop();

  const { problems, summary } = await verdict(k, ns, mix, ledger, STARTUP_SECONDS);
  console.log(`rolling-upgrade: ${JSON.stringify(summary)}`);
  expect(problems).toEqual([]);
  // Nothing sent to the old replica, while it served or drained, was dropped or failed.
  expect(mix.records.filter((c) => c.url === oldUrl && c.outcome !== 'ok')).toEqual([]);
  expect(mix.records.filter((c) => c.url === newUrl && c.outcome === 'ok').length).toBeGreaterThan(0);
  // Sessions of the old version live on, with their state, under the new one.
  expect(summary.sessionsSurviving).toBe(mix.sessions.length);
  return { oldUrl, newUrl };
}

describe('fault: a rolling upgrade to another version during the mix', () => {
  it('another sandbox (kernels, pool template): serves both side by side, each in pods of its own version', { timeout: 540_000 }, async () => {
    const [oldRuntime, newRuntime] = [runtimeConfigMapName(runtimeFiles()), runtimeConfigMapName(runtimeFiles('upgrade'))];
    expect(oldRuntime).not.toBe(newRuntime);
    await upgrade(
      async (env) => startGateway(env, await freePort()),
      async (env) => startGateway({ ...env, CODEMODE_CPU_REQUEST: '11m', [RUNTIME_VARIANT_ENV]: 'upgrade' }, await freePort()),
    );
    if (!oldReplica || !newReplica) throw new Error('both replicas ran');
    // The new version leads now: it keeps a pool of its own version and removes the old one's
    // unclaimed pods (claimed ones belong to their runs and sessions).
    await until(async () => (await poolPods(oldRuntime, 'warm')).length === 0, 120_000, 'no unclaimed pool pod of the old version');
    await until(async () => (await poolPods(newRuntime, 'warm')).length > 0, 120_000, 'a pool pod of the new version');
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

  // Upgrades and rollbacks (helm rollback) alike: the two codes serve side by side either way.
  it.each([
    ['upgraded to this checkout', 'release', 'this'],
    ['this checkout rolled back to it', 'this', 'release'],
  ] as const)(`another gateway: the previous release (${PREVIOUS_RELEASE.slice(0, 7)}), %s`, { timeout: 600_000 }, async (_name, from, to) => {
    const release = await releaseCheckout(PREVIOUS_RELEASE);
    const start =
      (code: 'release' | 'this'): Start =>
      async (env) =>
        startGateway(env, await freePort(), undefined, undefined, code === 'release' ? release : undefined);
    const { oldUrl } = await upgrade(start(from), start(to));
    // The old replica served calls of every kind before it left.
    for (const kind of ['transient', 'session'] as const) {
      expect(mix?.records.some((c) => c.url === oldUrl && c.kind === kind && c.outcome === 'ok')).toBe(true);
    }
  });
});
