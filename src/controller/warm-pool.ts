// The warm pool: pre-started sandbox pods with a kernel already running, so a first call skips
// pod start-up. The leader replica keeps `size` unclaimed pods; any replica claims one with an
// optimistic-concurrency patch (resourceVersion), so no pod is ever claimed twice. A claimed pod
// serves one run or one session and is then deleted: nothing leaks between users.
import type { V1OwnerReference, V1Pod } from '@kubernetes/client-node';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { LABEL_MANAGED_BY, MANAGED_BY_VALUE, SANDBOXRUN_KIND, type KernelLanguage } from '../api/v1alpha1/index.js';
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
  /**
   * How long a refill may wait for runs executing in claimed pool pods to end while the pool
   * still has a ready pod (see refillDeferralMs); 0 refills at once.
   */
  refillDeferMs?: number;
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

/** How long a created pool pod may stay unseen by the informer before it is no longer expected. */
const EXPECTATION_TTL_MS = 30_000;

const isWarm = (p: V1Pod): boolean => p.metadata?.labels?.[LABEL_POOL] === 'warm' && !p.metadata.deletionTimestamp;

/** Pure: how many pool pods to create (> 0) or delete (< 0) to get back to `size`. */
export function poolDelta(pods: readonly V1Pod[], size: number): number {
  const alive = pods.filter((p) => isWarm(p) && podState(p).kind !== 'failed');
  return size - alive.length;
}

/** A transient run executing right now in a pod it claimed from the pool. */
const isBusyRunPod = (p: V1Pod): boolean =>
  p.metadata?.labels?.[LABEL_POOL] === 'claimed' && !p.metadata.deletionTimestamp && (p.metadata.ownerReferences ?? []).some((o) => o.kind === SANDBOXRUN_KIND);

/**
 * Pure: how long a refill that would create pods should still wait, 0 for now. Starting a pod
 * costs the node about a second of kubelet, containerd and runc CPU; on a small node that CPU is
 * taken from the run that just claimed a pod (a warm `print(1)` measured 108 ms with the refill at
 * once, 72 ms with it deferred). So while the pool still has a ready pod for the next caller and
 * a transient run is executing in a claimed pod, the refill waits for those runs to end (their
 * pods' deletion triggers it) but no longer than `deferMs` after the pool fell short. An empty
 * pool refills at once: callers are going cold.
 */
export function refillDeferralMs(p: { readyWarm: number; busyRuns: number; shortSinceMs: number; nowMs: number; deferMs: number }): number {
  if (p.deferMs <= 0 || p.readyWarm === 0 || p.busyRuns === 0) return 0;
  return Math.max(0, p.shortSinceMs + p.deferMs - p.nowMs);
}

/**
 * Pods a controller created that its informer has not shown yet (client-go's "expectations"): a
 * refill right after a create — the pod's watch event can arrive after the create's response —
 * would otherwise count them missing and create them again. An expectation ends when the pod is
 * seen or after `ttlMs` (a create whose pod never shows up must not block refills for ever).
 */
export class CreateExpectations {
  private readonly names = new Map<string, number>();

  constructor(private readonly ttlMs: number) {}

  created(name: string, nowMs: number): void {
    this.names.set(name, nowMs);
  }

  /** Forgets the pods now seen (or expired) and returns how many are still expected. */
  pending(seen: Iterable<string>, nowMs: number): number {
    const present = new Set(seen);
    for (const [name, at] of this.names) if (present.has(name) || nowMs - at > this.ttlMs) this.names.delete(name);
    return this.names.size;
  }
}

export class WarmPool {
  private refilling = false;
  /** When this leader first saw the pool short of pods it has not created yet. */
  private shortSince: number | undefined;
  private readonly expected = new CreateExpectations(EXPECTATION_TTL_MS);

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

  /**
   * Leader only: create or delete pool pods to get back to the configured size. Returns the
   * milliseconds after which to call it again when it deferred creating pods.
   */
  async refill(): Promise<number | undefined> {
    if (!this.enabled || this.refilling) return undefined;
    this.refilling = true;
    try {
      const { opts } = this.d;
      const ns = opts.namespace;
      const all = this.d.pods.list(ns);
      const pods = all.filter(isWarm);
      // A pool pod that failed (evicted, OOM, image) is replaced, not reused.
      for (const p of pods.filter((x) => podState(x).kind === 'failed')) await this.delete(p);
      const nowMs = Date.now();
      let delta = poolDelta(pods, this.d.size) - this.expected.pending(all.map((p) => p.metadata?.name ?? ''), nowMs);
      if (delta <= 0) this.shortSince = undefined;
      else {
        this.shortSince ??= nowMs;
        const wait = refillDeferralMs({
          readyWarm: pods.filter((x) => podState(x).kind === 'ready').length,
          busyRuns: all.filter(isBusyRunPod).length,
          shortSinceMs: this.shortSince,
          nowMs,
          deferMs: this.d.refillDeferMs ?? 0,
        });
        if (wait > 0) return wait;
        this.shortSince = undefined;
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
        const created = await this.d.clients.core.createNamespacedPod({ namespace: ns, body });
        if (created.metadata?.name) this.expected.created(created.metadata.name, Date.now());
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
