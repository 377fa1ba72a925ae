// The warm pool: pre-started sandbox pods with a kernel already running, so a first call skips
// pod start-up. The leader replica keeps `size` unclaimed pods; any replica claims one with an
// optimistic-concurrency patch (resourceVersion), so no pod is ever claimed twice. A claimed pod
// serves one run or one session and is then deleted: nothing leaks between users.
import type { V1OwnerReference, V1Pod } from '@kubernetes/client-node';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { LABEL_MANAGED_BY, MANAGED_BY_VALUE, type KernelLanguage } from '../api/v1alpha1/index.js';
import { kernelCommand, type KernelConnections } from '../exec/kernel.js';
import { apiErrorMessage, isConflict, isNotFound, type KubeClients } from '../kube/clients.js';
import { LABEL_POOL, SANDBOX_CONTAINER, buildPoolPod } from '../sandbox/pod.js';
import { runtimeItems } from '../sandbox/runtime-configmap.js';
import type { ResilientInformer } from './informer.js';
import type { NetworkPolicyGuard } from './network-policy.js';
import type { ControllerOptions } from './options.js';
import type { RuntimeConfigMapGuard } from './runtime-guard.js';
import { podState } from './status.js';

export const POOL_LANGUAGE: KernelLanguage = 'python';

export interface WarmPoolDeps {
  clients: KubeClients;
  opts: ControllerOptions;
  size: number;
  pods: ResilientInformer<V1Pod>;
  policies: NetworkPolicyGuard;
  runtime: RuntimeConfigMapGuard;
  runtimePaths: readonly string[];
  log: Logger;
  onClaim?: (result: 'warm' | 'empty') => void;
  /**
   * When set, this process opens a kernel stream to every ready pool pod ahead of any claim, so
   * a run that claims one pays no exec set-up (~60 ms) on its path.
   */
  kernels?: KernelConnections;
}

export function poolSelector(): string {
  return `${LABEL_MANAGED_BY}=${MANAGED_BY_VALUE},${LABEL_POOL}`;
}

const isWarm = (p: V1Pod): boolean => p.metadata?.labels?.[LABEL_POOL] === 'warm' && !p.metadata.deletionTimestamp;

/** Pure: how many pool pods to create (> 0) or delete (< 0) to get back to `size`. */
export function poolDelta(pods: readonly V1Pod[], size: number): number {
  const alive = pods.filter((p) => isWarm(p) && podState(p).kind !== 'failed');
  return size - alive.length;
}

export class WarmPool {
  private refilling = false;

  constructor(private readonly d: WarmPoolDeps) {
    const kernels = d.kernels;
    if (!kernels || d.size <= 0) return;
    d.pods.onChange((p) => {
      const ns = p.metadata?.namespace;
      const name = p.metadata?.name;
      if (ns !== d.opts.namespace || !name || !isWarm(p) || podState(p).kind !== 'ready') return;
      kernels.get(ns, name, SANDBOX_CONTAINER, POOL_LANGUAGE).catch((err: unknown) => d.log.debug({ pod: name, err: apiErrorMessage(err) }, 'Could not connect to a pool pod yet'));
    });
    d.pods.onDelete((p) => {
      if (p.metadata?.namespace && p.metadata.name) kernels.drop(p.metadata.namespace, p.metadata.name);
    });
  }

  get enabled(): boolean {
    return this.d.size > 0;
  }

  private warmPods(): V1Pod[] {
    return this.d.pods.list(this.d.opts.namespace).filter(isWarm);
  }

  /** Leader only: create or delete pool pods to get back to the configured size. */
  async refill(): Promise<void> {
    if (!this.enabled || this.refilling) return;
    this.refilling = true;
    try {
      const { opts } = this.d;
      const ns = opts.namespace;
      const pods = this.warmPods();
      // A pool pod that failed (evicted, OOM, image) is replaced, not reused.
      for (const p of pods.filter((x) => podState(x).kind === 'failed')) await this.delete(p);
      let delta = poolDelta(pods, this.d.size);
      if (delta > 0) {
        await this.d.policies.ensure(ns);
        await this.d.runtime.ensure(ns);
      }
      for (; delta > 0; delta--) {
        const body = buildPoolPod(
          ns,
          POOL_LANGUAGE,
          {
            image: opts.images[POOL_LANGUAGE],
            imagePullPolicy: opts.imagePullPolicy,
            cpuLimit: opts.defaultCpu,
            memoryLimit: opts.defaultMemory,
            cpuRequest: opts.cpuRequest,
            memoryRequest: opts.memoryRequest,
            ephemeralStorageLimit: opts.ephemeralStorageLimit,
            workspaceSizeLimit: opts.workspaceSizeLimit,
            tmpSizeLimit: opts.tmpSizeLimit,
            runtimeClassName: opts.runtimeClassName,
          },
          kernelCommand(POOL_LANGUAGE, { prestart: true }),
          runtimeItems(this.d.runtimePaths),
        );
        await this.d.clients.core.createNamespacedPod({ namespace: ns, body });
      }
      for (const p of pods.filter((x) => podState(x).kind !== 'failed').slice(this.d.size)) await this.delete(p);
    } catch (err) {
      this.d.log.warn({ err: apiErrorMessage(err) }, 'Failed to refill the warm pool');
    } finally {
      this.refilling = false;
    }
  }

  /**
   * Takes a ready pool pod for `owner`: relabels it, sets its owner and deadline, all in one patch
   * guarded by resourceVersion. Undefined when the pool has no ready pod (the caller goes cold).
   */
  async claim(owner: V1OwnerReference, labels: Record<string, string>, deadlineFromNowSeconds: number): Promise<V1Pod | undefined> {
    if (!this.enabled) return undefined;
    const ready = this.warmPods()
      .filter((p) => podState(p).kind === 'ready')
      .sort((a, b) => String(a.metadata?.creationTimestamp).localeCompare(String(b.metadata?.creationTimestamp)));
    // Replicas claiming at once would all start with the oldest pod; a random start spreads them.
    const start = ready.length > 0 ? Math.floor(Math.random() * ready.length) : 0;
    for (let i = 0; i < ready.length; i++) {
      const pod = ready[(start + i) % ready.length] as V1Pod;
      const started = pod.status?.startTime ? new Date(pod.status.startTime).getTime() : Date.now();
      const age = Math.max(0, Math.ceil((Date.now() - started) / 1000));
      try {
        const claimed = await this.d.clients.core.patchNamespacedPod(
          {
            namespace: pod.metadata?.namespace ?? this.d.opts.namespace,
            name: pod.metadata?.name ?? '',
            body: {
              metadata: { resourceVersion: pod.metadata?.resourceVersion, labels: { ...labels, [LABEL_POOL]: 'claimed' }, ownerReferences: [owner] },
              // The deadline counts from the pod's start, which was before the claim.
              spec: { activeDeadlineSeconds: age + deadlineFromNowSeconds },
            },
          },
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        );
        this.d.onClaim?.('warm');
        return claimed;
      } catch (err) {
        if (isConflict(err) || isNotFound(err)) continue; // someone else got it
        throw new Error(`Failed to claim warm pod ${pod.metadata?.name}: ${apiErrorMessage(err)}`, { cause: err });
      }
    }
    this.d.onClaim?.('empty');
    return undefined;
  }

  private async delete(p: V1Pod): Promise<void> {
    await this.d.clients.core.deleteNamespacedPod({ namespace: p.metadata?.namespace ?? '', name: p.metadata?.name ?? '', gracePeriodSeconds: 0 }).catch((err: unknown) => {
      if (!isNotFound(err)) this.d.log.warn({ pod: p.metadata?.name, err: apiErrorMessage(err) }, 'Failed to delete pool Pod');
    });
  }
}
