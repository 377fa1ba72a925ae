// The warm-pool controller as createOperator (src/operator.ts) wires it — the real WarmPool,
// RuntimeConfigMapGuard (with the real runtime/ files), NetworkPolicyGuard and pod informer — but
// without the leader election: the test calls PoolController.reconcile itself, with a fixed clock.
//
// No pool pod ever runs here either: every pod the controller creates gets the marker scheduling
// gate on its way to the API server (the template and its hash are untouched), so pods stay
// Pending and nothing but the test and the controller writes them. Every delete the controller
// sends is recorded, and settle() fails if one lacked uid and resourceVersion preconditions; a
// hook can change the object just before the delete lands (another replica's claim racing it).
import type { CoreV1Api, V1Pod } from '@kubernetes/client-node';
import { loadConfig, type Config } from '../../../src/config/index.js';
import { NetworkPolicyGuard } from '../../../src/controller/network-policy.js';
import { PoolController } from '../../../src/controller/pool-controller.js';
import { RuntimeConfigMapGuard } from '../../../src/controller/runtime-guard.js';
import { WarmPool, poolPodTemplate } from '../../../src/controller/warm-pool.js';
import { podSelector } from '../../../src/controller/run-controller.js';
import type { KubeClients } from '../../../src/kube/clients.js';
import { controllerOptions } from '../../../src/operator.js';
import { LABEL_POOL_HASH } from '../../../src/sandbox/pod.js';
import { runtimeVolume } from '../../../src/sandbox/runtime-configmap.js';
import { findRuntimeDir, readRuntimeFiles } from '../../../src/sessions/runtime-files.js';
import { IDENTITY, InFlight, cacheOf, log, podInformer, settle, type Rig } from './rig.js';
import { MARKER_GATE } from './world.js';

export interface PoolRig extends Rig {
  controller: { reconcile(key: string): Promise<{ requeueAfterMs?: number }> };
  pool: WarmPool;
  /** Stops the pod informer's watch, its cache kept as it is (see RunRig.freezeRunCache). */
  freezePodCache(): Promise<void>;
}

const runtimeDir = findRuntimeDir();
if (!runtimeDir) throw new Error('runtime/ not found: the pool rig needs the session kernels');
/** The kernels' files, as the operator reads them from this checkout. */
export const RUNTIME_FILES = readRuntimeFiles(runtimeDir);

/** The pool's settings of a row: CODEMODE_WARM_POOL_MIN and _MAX (default 2 and 2). */
export function poolConfig(namespace: string, env: Record<string, string> = {}): Config {
  const min = env.CODEMODE_WARM_POOL_MIN ?? '2';
  return loadConfig({
    CODEMODE_NAMESPACE: namespace,
    CODEMODE_IMAGE_PULL_POLICY: 'Never',
    CODEMODE_WARM_POOL_MIN: min,
    CODEMODE_WARM_POOL_MAX: env.CODEMODE_WARM_POOL_MAX ?? min,
    ...env,
  });
}

/** The pool pod this checkout builds (its hash does not depend on the namespace). */
export function currentPoolPod(env: Record<string, string> = {}): { hash: string; deadlineSeconds: number | undefined } {
  const template = poolPodTemplate(controllerOptions(poolConfig('any', env), IDENTITY), runtimeVolume(RUNTIME_FILES));
  return { hash: template.metadata?.labels?.[LABEL_POOL_HASH] ?? '', deadlineSeconds: template.spec?.activeDeadlineSeconds };
}

/** `beforeDelete` runs just before a delete the controller sends reaches the API server (a race). */
export interface PoolRigHooks {
  beforeDelete?(namespace: string, what: string): Promise<void>;
}

export async function poolRig(
  clients: KubeClients,
  namespace: string,
  now: Date,
  env: Record<string, string> = {},
  hooks: PoolRigHooks = {},
): Promise<PoolRig> {
  const config = poolConfig(namespace, env);
  const opts = controllerOptions(config, IDENTITY);
  const calls = new InFlight();
  const deletes: Array<{ what: string; preconditions?: { uid?: string; resourceVersion?: string } }> = [];
  const api = calls.clients({ ...clients, core: gated(clients.core, deletes, hooks) });
  const pods = podInformer(clients, namespace);
  const runtime = new RuntimeConfigMapGuard(api, RUNTIME_FILES, log);
  const clock = (): number => now.getTime();
  // Started as the operator starts it (it creates the policy); no CNI programs it here, so no settle wait.
  const policies = new NetworkPolicyGuard(api, namespace, log, undefined, { settleMs: 0 });
  await policies.start();
  const pool = new WarmPool({
    clients: api,
    opts,
    min: config.warmPoolMin,
    max: config.warmPoolMax,
    refillDeferMs: config.warmPoolRefillDeferMs,
    pods,
    policies,
    runtime,
    log,
    now: clock,
  });
  const controller = new PoolController({
    pools: { all: () => [pool], pool: (name) => (name === pool.name ? pool : undefined), main: pool },
    pods,
    runtime,
    clients: api,
    namespace,
    identity: IDENTITY,
    resyncMs: config.resyncSeconds * 1000,
    refillDeferMs: config.warmPoolRefillDeferMs,
    log,
    now: clock,
  });
  await pods.start();
  // As start() does once the informer has listed, without the election.
  controller.prime();
  let caches = [cacheOf(pods, () => clients.core.listNamespacedPod({ namespace, labelSelector: podSelector() }))];
  return {
    config,
    pool,
    controller: { reconcile: () => controller.reconcile() },
    async settle(): Promise<void> {
      await settle(calls, caches, async () => undefined);
      const bare = deletes.filter((d) => !d.preconditions?.uid || !d.preconditions.resourceVersion);
      if (bare.length > 0) throw new Error(`deleted without uid and resourceVersion preconditions: ${bare.map((d) => d.what).join(', ')}`);
    },
    async freezePodCache(): Promise<void> {
      caches = [];
      await pods.stop();
    },
    async stop(): Promise<void> {
      await policies.stop();
      await pods.stop();
    },
  };
}

/** `core` with the marker gate added to every pod it creates and every delete recorded. */
function gated(core: CoreV1Api, deletes: Array<{ what: string; preconditions?: { uid?: string; resourceVersion?: string } }>, hooks: PoolRigHooks): CoreV1Api {
  return new Proxy(core, {
    get(target, prop, receiver): unknown {
      const v: unknown = Reflect.get(target, prop, receiver);
      if (typeof v !== 'function') return v;
      const call = (...args: unknown[]): unknown => (v as (...a: unknown[]) => unknown).apply(target, args);
      if (prop === 'createNamespacedPod') {
        return (req: { namespace: string; body: V1Pod }, ...rest: unknown[]) =>
          call({ ...req, body: { ...req.body, spec: { ...req.body.spec, schedulingGates: [{ name: MARKER_GATE }] } } }, ...rest);
      }
      if (typeof prop === 'string' && prop.startsWith('deleteNamespaced')) {
        return async (req: { namespace: string; name: string; body?: { preconditions?: { uid?: string; resourceVersion?: string } } }, ...rest: unknown[]) => {
          const what = `${prop.slice('deleteNamespaced'.length)}/${req.name}`;
          deletes.push({ what, preconditions: req.body?.preconditions });
          await hooks.beforeDelete?.(req.namespace, what);
          return call(req, ...rest);
        };
      }
      return call;
    },
  });
}
