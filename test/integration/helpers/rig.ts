// The controllers under test, built from the same pieces createOperator (src/operator.ts) wires —
// real informers on the real API server, the real RunExecutor, RunSlots, Event recorder — but not
// started: their work queues stay paused, so the only reconcile that happens is the one a test
// calls, with a fixed clock (the controllers' `now`). No gateway, no warm pool, no self-check.
//
// settle() makes "after reconcile" exact instead of timed: every API call the controller side
// makes goes through a proxy that remembers its promise (the controllers fire some writes and
// forget them: Events, pod deletes, the execution of a claimed run), and settle waits until none
// is in flight, then until the informer caches hold what the API server holds.
import type { KubernetesListObject, KubernetesObject, V1Pod } from '@kubernetes/client-node';
import { pino } from 'pino';
import { GROUP, SANDBOXRUN_PLURAL, SANDBOXSESSION_PLURAL, VERSION } from '../../../src/api/v1alpha1/index.js';
import { loadConfig, type Config } from '../../../src/config/index.js';
import { stripRun } from '../../../src/controller/cached-run.js';
import { NetworkPolicyGuard } from '../../../src/controller/network-policy.js';
import { SandboxRunController, podSelector } from '../../../src/controller/run-controller.js';
import { RuntimeConfigMapGuard } from '../../../src/controller/runtime-guard.js';
import { SandboxSessionController, type SessionControllerDeps } from '../../../src/controller/session-controller.js';
import { keepActivityStamp } from '../../../src/controller/session-gc.js';
import type { KubeClients } from '../../../src/kube/clients.js';
import { EventRecorder } from '../../../src/kube/events.js';
import { LIST_PAGE_SIZE, ResilientInformer } from '../../../src/kube/informer.js';
import { RunSlots } from '../../../src/limits/run-slots.js';
import { controllerOptions } from '../../../src/operator.js';
import { RunExecutor } from '../../../src/runs/executor.js';
import { PodWatcher } from '../../../src/sandbox/pod-watcher.js';
import { until } from '../../e2e/helpers/kube.js';

/** The executor annotation this rig's replica writes. */
export const IDENTITY = 'integration-replica';

export const log = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });

export interface Rig {
  config: Config;
  /** Waits until no API call of the controllers is in flight and the caches hold the API's state. */
  settle(): Promise<void>;
  stop(): Promise<void>;
}

export interface RunRig extends Rig {
  controller: SandboxRunController;
  /** The run engine the controller starts runs with (the gateway calls it directly). */
  executor: RunExecutor;
  /**
   * Stops the run informer's watch, its cache kept as it is (as a watch broken by an API server
   * restart leaves it): later writes reach the API only. settle() then no longer waits for it.
   */
  freezeRunCache(): Promise<void>;
}

export interface SessionRig extends Rig {
  controller: SandboxSessionController;
  /** Stops the session informer's watch, its cache kept as it is (see RunRig.freezeRunCache). */
  freezeSessionCache(): Promise<void>;
  /** Stops the pod informer's watch, its cache kept as it is (see RunRig.freezeRunCache). */
  freezePodCache(): Promise<void>;
}

/** `env`: CODEMODE_* settings of this row (the namespace and a pool of 0 are set here). */
export function rigConfig(namespace: string, env: Record<string, string> = {}): Config {
  return loadConfig({ CODEMODE_NAMESPACE: namespace, CODEMODE_WARM_POOL_SIZE: '0', CODEMODE_IMAGE_PULL_POLICY: 'Never', ...env });
}

export async function runRig(clients: KubeClients, namespace: string, now: Date, env: Record<string, string> = {}): Promise<RunRig> {
  const config = rigConfig(namespace, env);
  const opts = controllerOptions(config, IDENTITY);
  const calls = new InFlight();
  const api = calls.clients(clients);
  const runs = runInformer(clients, namespace);
  const pods = podInformer(clients, namespace);
  const policies = new NetworkPolicyGuard(api, namespace, log);
  const executor = new RunExecutor({ clients: api, opts, pods: new PodWatcher(pods), policies, events: new EventRecorder(api.events, IDENTITY, log), log });
  const slots = new RunSlots(runs, pods, IDENTITY, {
    namespace,
    caps: {
      replicaRuns: config.maxConcurrentRuns,
      namespaceRuns: config.maxNamespaceRuns,
      queueLength: config.runQueueLength,
      queueTimeoutSeconds: config.runQueueTimeoutSeconds,
    },
  });
  const controller = new SandboxRunController({ clients: api, opts, log, executor, runs, pods, slots, now: () => now });
  await runs.start();
  await pods.start();
  const runCache = cacheOf(runs, () => listRuns(clients, namespace));
  const podCache = cacheOf(pods, () => clients.core.listNamespacedPod({ namespace, labelSelector: podSelector() }));
  let caches = [runCache, podCache];
  return {
    config,
    controller,
    executor,
    settle: () => settle(calls, caches, () => executor.drain()),
    async freezeRunCache(): Promise<void> {
      caches = [podCache];
      await runs.stop();
    },
    async stop(): Promise<void> {
      slots.admission.close();
      await executor.drain();
      await runs.stop();
      await pods.stop();
    },
  };
}

export async function sessionRig(
  clients: KubeClients,
  namespace: string,
  now: Date,
  env: Record<string, string> = {},
  /** What the operator wires besides (the package installer, say). */
  extra: Pick<SessionControllerDeps, 'packages' | 'installsHere'> = {},
): Promise<SessionRig> {
  const config = rigConfig(namespace, env);
  const opts = controllerOptions(config, IDENTITY);
  const calls = new InFlight();
  const api = calls.clients(clients);
  const sessions = new ResilientInformer<KubernetesObject>(
    clients.kc,
    `/apis/${GROUP}/${VERSION}/namespaces/${namespace}/${SANDBOXSESSION_PLURAL}`,
    (cont) => listSessions(clients, namespace, cont),
    log,
    { transform: keepActivityStamp },
  );
  const pods = podInformer(clients, namespace);
  const controller = new SandboxSessionController({
    clients: api,
    opts,
    log,
    sessions,
    pods,
    policies: new NetworkPolicyGuard(api, namespace, log),
    runtime: new RuntimeConfigMapGuard(api, {}, log),
    events: new EventRecorder(api.events, IDENTITY, log),
    now: () => now,
    ...extra,
  });
  await sessions.start();
  await pods.start();
  const podCache = cacheOf(pods, () => clients.core.listNamespacedPod({ namespace, labelSelector: podSelector() }));
  let caches = [cacheOf(sessions, () => listSessions(clients, namespace)), podCache];
  return {
    config,
    controller,
    settle: () => settle(calls, caches, async () => undefined),
    async freezeSessionCache(): Promise<void> {
      caches = caches.filter((c) => c === podCache);
      await sessions.stop();
    },
    async freezePodCache(): Promise<void> {
      caches = caches.filter((c) => c !== podCache);
      await pods.stop();
    },
    async stop(): Promise<void> {
      await sessions.stop();
      await pods.stop();
    },
  };
}

// The informers as src/operator.ts builds them (runs stripped of code and outputs, pods by label).
export function runInformer(clients: KubeClients, namespace: string): ResilientInformer<KubernetesObject> {
  return new ResilientInformer<KubernetesObject>(
    clients.kc,
    `/apis/${GROUP}/${VERSION}/namespaces/${namespace}/${SANDBOXRUN_PLURAL}`,
    (cont) => listRuns(clients, namespace, cont),
    log,
    { transform: stripRun },
  );
}

export function podInformer(clients: KubeClients, namespace: string): ResilientInformer<V1Pod> {
  return new ResilientInformer<V1Pod>(
    clients.kc,
    `/api/v1/namespaces/${namespace}/pods`,
    (cont) => clients.core.listNamespacedPod({ namespace, labelSelector: podSelector(), limit: LIST_PAGE_SIZE, _continue: cont }),
    log,
    { labelSelector: podSelector() },
  );
}

function listRuns(clients: KubeClients, namespace: string, cont?: string): Promise<KubernetesListObject<KubernetesObject>> {
  return clients.custom.listNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace,
    plural: SANDBOXRUN_PLURAL,
    limit: LIST_PAGE_SIZE,
    _continue: cont,
  }) as Promise<KubernetesListObject<KubernetesObject>>;
}

function listSessions(clients: KubeClients, namespace: string, cont?: string): Promise<KubernetesListObject<KubernetesObject>> {
  return clients.custom.listNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace,
    plural: SANDBOXSESSION_PLURAL,
    limit: LIST_PAGE_SIZE,
    _continue: cont,
  }) as Promise<KubernetesListObject<KubernetesObject>>;
}

/** Promises of API calls still in flight, kept by proxies around the API clients. */
export class InFlight {
  readonly pending = new Set<Promise<void>>();

  clients(c: KubeClients): KubeClients {
    return {
      ...c,
      core: this.track(c.core),
      custom: this.track(c.custom),
      networking: this.track(c.networking),
      events: this.track(c.events),
      coordination: this.track(c.coordination),
    };
  }

  private track<T extends object>(api: T): T {
    const pending = this.pending;
    return new Proxy(api, {
      get(target, prop, receiver): unknown {
        const v: unknown = Reflect.get(target, prop, receiver);
        if (typeof v !== 'function') return v;
        return (...args: unknown[]): unknown => {
          const r: unknown = (v as (...a: unknown[]) => unknown).apply(target, args);
          if (r instanceof Promise) {
            const p: Promise<void> = r.then(
              () => undefined,
              () => undefined,
            );
            pending.add(p);
            void p.finally(() => pending.delete(p));
          }
          return r;
        };
      },
    });
  }
}

export interface Cache {
  /** name → resourceVersion in the informer's cache and in the API server. */
  cached(): Map<string, string | undefined>;
  actual(): Promise<Map<string, string | undefined>>;
}

export function cacheOf<T extends KubernetesObject>(informer: ResilientInformer<T>, list: () => Promise<KubernetesListObject<T>>): Cache {
  const byName = (items: readonly T[]): Map<string, string | undefined> => new Map(items.map((o) => [o.metadata?.name ?? '', o.metadata?.resourceVersion]));
  return { cached: () => byName(informer.list()), actual: async () => byName((await list()).items) };
}

export async function settle(calls: InFlight, caches: Cache[], drain: () => Promise<void>): Promise<void> {
  // Quiet = nothing in flight across a macrotask (a call may start right after another ends).
  for (let quiet = 0; quiet < 2;) {
    await drain();
    if (calls.pending.size > 0) {
      quiet = 0;
      await Promise.all([...calls.pending]);
    } else {
      quiet++;
      await new Promise((r) => setTimeout(r, 10));
    }
  }
  for (const c of caches) {
    await until(async () => sameMap(c.cached(), await c.actual()), 30_000, 'the informer caches to hold the API server state');
  }
}

function sameMap(a: Map<string, string | undefined>, b: Map<string, string | undefined>): boolean {
  return a.size === b.size && [...a].every(([k, v]) => b.get(k) === v);
}
