// The pods the floor measurements use: the operator's own hardened pod spec (buildRunPod with the
// default configuration) minus the owner reference, and a watch on them (the operator's
// ResilientInformer + PodWatcher) that also timestamps when each pod is scheduled and ready.
import type { V1Pod } from '@kubernetes/client-node';
import { pino } from 'pino';
import { LABEL_MANAGED_BY, MANAGED_BY_VALUE, type SandboxRun } from '../src/api/v1alpha1/index.js';
import { loadConfig } from '../src/config/index.js';
import { LIST_PAGE_SIZE, ResilientInformer } from '../src/kube/informer.js';
import { PodWatcher } from '../src/sandbox/pod-watcher.js';
import { SANDBOX_CONTAINER, buildRunPod } from '../src/sandbox/pod.js';
import { buildSandboxNetworkPolicy } from '../src/sandbox/networkpolicy.js';
import type { TestKube } from '../test/e2e/helpers/kube.js';

export { SANDBOX_CONTAINER };

/** The pod the operator would create for a python run, under `name`, owned by nobody. */
export function floorPod(namespace: string, name: string, image?: string): V1Pod {
  const c = loadConfig({ CODEMODE_IMAGE_PULL_POLICY: 'Never' });
  const run = {
    apiVersion: 'codemode.dev/v1alpha1',
    kind: 'SandboxRun',
    // A placeholder uid: the owner reference is removed below, or the garbage collector would
    // delete the pod for having an owner that does not exist.
    metadata: { name, namespace, uid: '00000000-0000-0000-0000-000000000000', generation: 1 },
    spec: { language: 'python', code: 'print(1)', timeoutSeconds: c.defaultTimeoutSeconds },
  } as SandboxRun;
  const pod = buildRunPod(run, {
    image: image ?? c.images.python,
    imagePullPolicy: c.imagePullPolicy,
    cpuLimit: c.defaultCpu,
    memoryLimit: c.defaultMemory,
    cpuRequest: c.cpuRequest,
    memoryRequest: c.memoryRequest,
    ephemeralStorageLimit: c.ephemeralStorageLimit,
    workspaceSizeLimit: c.workspaceSizeLimit,
    tmpSizeLimit: c.tmpSizeLimit,
    activeDeadlineSeconds: 3600,
  });
  return { ...pod, metadata: { ...pod.metadata, name, ownerReferences: undefined } };
}

/** The namespace's deny-all NetworkPolicy, as the operator creates it before its first pod. */
export async function ensureNetworkPolicy(k: TestKube, namespace: string): Promise<void> {
  await k.networking.createNamespacedNetworkPolicy({ namespace, body: buildSandboxNetworkPolicy(namespace) });
}

export interface PodTimes {
  /** performance.now() when the watch first saw the pod, saw spec.nodeName, saw it Running+Ready. */
  seen?: number;
  scheduled?: number;
  ready?: number;
}

/** A watch on the sandbox pods of one namespace, with per-pod timestamps. */
export class PodTimeline {
  readonly informer: ResilientInformer<V1Pod>;
  readonly watcher: PodWatcher;
  private readonly times = new Map<string, PodTimes>();
  private lastReady: number | undefined;

  constructor(
    k: TestKube,
    readonly namespace: string,
  ) {
    const selector = `${LABEL_MANAGED_BY}=${MANAGED_BY_VALUE}`;
    this.informer = new ResilientInformer<V1Pod>(
      k.kc,
      `/api/v1/namespaces/${namespace}/pods`,
      (cont) => k.core.listNamespacedPod({ namespace, labelSelector: selector, limit: LIST_PAGE_SIZE, _continue: cont }),
      pino({ level: 'silent' }),
      { labelSelector: selector },
    );
    this.informer.onChange((pod) => this.record(pod));
    this.watcher = new PodWatcher(this.informer);
  }

  start(): Promise<void> {
    return this.informer.start();
  }

  stop(): Promise<void> {
    return this.informer.stop();
  }

  /** When the watch last saw a pod become Ready (performance.now()): a moment just after a kubelet relist. */
  lastReadyMs(): number | undefined {
    return this.lastReady;
  }

  timesOf(name: string): PodTimes {
    return this.times.get(name) ?? {};
  }

  /** Pods still present (terminating ones included). */
  count(): number {
    return this.informer.list(this.namespace).length;
  }

  /**
   * Names of the ready pods with `label=value` not being deleted, and for which `keep` holds, from
   * the watch cache (no API call).
   */
  readyNamesWith(label: string, value: string, keep: (p: V1Pod) => boolean = () => true): string[] {
    return this.informer
      .list(this.namespace)
      .filter(
        (p) =>
          p.metadata?.labels?.[label] === value &&
          !p.metadata.deletionTimestamp &&
          p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') &&
          keep(p),
      )
      .map((p) => p.metadata?.name ?? '');
  }

  /** Resolves once `readyNamesWith(label, value, keep)` has `count` pods; false after `timeoutMs`. */
  async untilReady(label: string, value: string, count: number, timeoutMs: number, keep?: (p: V1Pod) => boolean): Promise<boolean> {
    const deadline = performance.now() + timeoutMs;
    while (this.readyNamesWith(label, value, keep).length < count) {
      if (performance.now() > deadline) return false;
      await new Promise((r) => setTimeout(r, 50));
    }
    return true;
  }

  /** Resolves once no sandbox pod is left in the namespace (or after `timeoutMs`). */
  async drained(timeoutMs: number): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    while (this.count() > 0 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 200));
  }

  private record(pod: V1Pod): void {
    const name = pod.metadata?.name ?? '';
    const t = performance.now();
    const times = this.times.get(name) ?? {};
    times.seen ??= t;
    if (pod.spec?.nodeName) times.scheduled ??= t;
    const ready = pod.status?.phase === 'Running' && pod.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
    if (ready && times.ready === undefined) {
      times.ready = t;
      this.lastReady = t;
    }
    this.times.set(name, times);
  }
}
