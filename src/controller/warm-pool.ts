// The warm pool: pre-started sandbox pods with a kernel already running, so a first call skips
// pod start-up. The leader replica (PoolController) keeps the number of unclaimed pods of this
// version at the size demand asks for; any replica claims one with an optimistic-concurrency patch
// (resourceVersion), so no pod is ever claimed twice. A claimed pod serves one run or one session
// and is then deleted: nothing leaks between users. Pods are versioned: each carries the hash of
// its template, only pods of this operator's hash are claimed, others are replaced.
import type { V1OwnerReference, V1Pod } from '@kubernetes/client-node';
import { setHeaderOptions } from '@kubernetes/client-node/dist/middleware.js';
import { PatchStrategy } from '@kubernetes/client-node/dist/patch.js';
import type { Logger } from 'pino';
import { LABEL_MANAGED_BY, LABEL_RUN, LABEL_RUNTIME, LABEL_SESSION, MANAGED_BY_VALUE } from '../api/v1alpha1/index.js';
import { kernelCommand, type KernelConnections } from '../exec/kernel.js';
import { apiErrorMessage, isConflict, isNotFound, statusOf, type KubeClients } from '../kube/clients.js';
import { LABEL_POOL, LABEL_POOL_HASH, POOL_LANGUAGE, SANDBOX_CONTAINER, buildPoolPod, sandboxPodOptions } from '../sandbox/pod.js';
import type { RuntimeVolume } from '../sandbox/runtime-configmap.js';
import { parseQuantity } from '../config/quantity.js';
import type { ResilientInformer } from '../kube/informer.js';
import type { NetworkPolicyGuard } from './network-policy.js';
import type { ControllerOptions } from './options.js';
import { CreateExpectations, isBusyRunPod, isWarm, planPool, poolPodDeadlineSeconds, refillDeferralMs, type RemoveCause } from './pool-plan.js';
import type { RuntimeConfigMapGuard } from './runtime-guard.js';
import { podState } from '../sandbox/pod-state.js';

export { CreateExpectations, refillDeferralMs } from './pool-plan.js';

/** Unclaimed pool pods are replaced after this long (their deadline renewed by replacement). */
export const POOL_POD_LIFETIME_SECONDS = 3600;

export interface WarmPoolDeps {
  clients: KubeClients;
  opts: ControllerOptions;
  /** Largest pool; 0 disables claims and drains the pool. */
  max: number;
  /**
   * How long a refill may wait for runs executing in claimed pool pods to end while the pool
   * still has a ready pod (see refillDeferralMs); 0 refills at once.
   */
  refillDeferMs?: number;
  pods: ResilientInformer<V1Pod>;
  policies: NetworkPolicyGuard;
  runtime: RuntimeConfigMapGuard;
  log: Logger;
  /** Told of each claim: warm (with the seconds the claim took) or empty (the caller goes cold). */
  onClaim?: (result: 'warm' | 'empty', seconds: number) => void;
  /**
   * When set, this process opens a kernel stream to every ready pool pod of its version ahead of
   * any claim, so a run that claims one pays no exec set-up (~60 ms) on its path.
   */
  kernels?: KernelConnections;
  /** The clock refills judge pod age by (tests fix it); Date.now by default. */
  now?: () => number;
}

export function poolSelector(): string {
  return `${LABEL_MANAGED_BY}=${MANAGED_BY_VALUE},${LABEL_POOL}`;
}

/** How long a created pool pod may stay unseen by the informer before it is no longer expected. */
const EXPECTATION_TTL_MS = 30_000;

/** The pool pod this operator builds: pure, so its hash is the same in every replica of a version. */
export function poolPodTemplate(opts: ControllerOptions, runtime: RuntimeVolume): V1Pod {
  const deadline = poolPodDeadlineSeconds({ poolLifetimeSeconds: POOL_POD_LIFETIME_SECONDS, ...opts });
  const build = sandboxPodOptions(opts, { image: opts.images[POOL_LANGUAGE], activeDeadlineSeconds: deadline });
  return buildPoolPod(opts.namespace, POOL_LANGUAGE, build, kernelCommand(POOL_LANGUAGE, { prestart: true }), runtime);
}

// The API server returns quantities in canonical form (0.5 → 500m): compare values, not strings.
function sameQuantities(a: Record<string, string> | undefined, b: Record<string, string> | undefined): boolean {
  const keys = new Set([...Object.keys(a ?? {}), ...Object.keys(b ?? {})]);
  const value = (q: string | undefined): number => {
    try {
      return q === undefined ? NaN : parseQuantity(q);
    } catch {
      return NaN;
    }
  };
  return [...keys].every((k) => value(a?.[k]) === value(b?.[k]));
}

export class WarmPool {
  private refilling = false;
  /** When this leader first saw the pool short of pods it has not created yet. */
  private shortSince: number | undefined;
  private readonly expected = new CreateExpectations(EXPECTATION_TTL_MS);
  private readonly template: V1Pod;
  /** The hash of this operator's pool pods: only these are claimed. */
  readonly hash: string;

  constructor(private readonly d: WarmPoolDeps) {
    this.template = poolPodTemplate(d.opts, d.runtime.volume);
    this.hash = this.template.metadata?.labels?.[LABEL_POOL_HASH] ?? '';
    const kernels = d.kernels;
    if (!kernels || d.max <= 0) return;
    d.pods.onChange((p) => {
      const ns = p.metadata?.namespace;
      const name = p.metadata?.name;
      if (ns !== d.opts.namespace || !name || !this.isCurrent(p) || podState(p).kind !== 'ready') return;
      kernels
        .get(ns, name, SANDBOX_CONTAINER, POOL_LANGUAGE)
        .catch((err: unknown) => d.log.debug({ pod: name, err: apiErrorMessage(err) }, 'Could not connect to a pool pod yet'));
    });
    d.pods.onDelete((p) => {
      if (p.metadata?.namespace && p.metadata.name) kernels.drop(p.metadata.namespace, p.metadata.name);
    });
  }

  get enabled(): boolean {
    return this.d.max > 0;
  }

  /**
   * Whether `p`, a cold run or session pod, is one a pool pod could have served (same image and
   * limits): such a pod is a claim that found the pool empty, i.e. demand.
   */
  couldServe(p: V1Pod): boolean {
    const labels = p.metadata?.labels ?? {};
    if (!this.enabled || labels[LABEL_POOL] !== undefined) return false;
    // Any run may use a pool pod (its kernel starts any language); a session only a python one.
    const fits = labels[LABEL_RUN] !== undefined || (labels[LABEL_SESSION] !== undefined && labels[LABEL_RUNTIME] === POOL_LANGUAGE);
    if (!fits) return false;
    const want = this.template.spec?.containers[0];
    const got = p.spec?.containers.find((c) => c.name === SANDBOX_CONTAINER);
    return !!want && !!got && got.image === want.image && sameQuantities(got.resources?.limits, want.resources?.limits);
  }

  private isCurrent(p: V1Pod): boolean {
    return isWarm(p) && p.metadata?.labels?.[LABEL_POOL_HASH] === this.hash;
  }

  /**
   * Leader only: replace stale, failed and expired pool pods and bring this version's unclaimed
   * pods to `target` (0 drains the pool). Returns the milliseconds after which to call it again
   * when it deferred creating pods.
   */
  async refill(target: number): Promise<number | undefined> {
    if (this.refilling) return undefined;
    this.refilling = true;
    try {
      const ns = this.d.opts.namespace;
      const all = this.d.pods.list(ns);
      const now = this.d.now ?? Date.now;
      const nowMs = now();
      const pending = this.expected.pending(
        all.map((p) => p.metadata?.name ?? ''),
        nowMs,
      );
      const plan = planPool(all, { hash: this.hash, target, nowMs, maxAgeMs: POOL_POD_LIFETIME_SECONDS * 1000, pending });
      for (const { pod, cause } of plan.remove) await this.delete(pod, cause);
      if (plan.create <= 0) {
        this.shortSince = undefined;
        return undefined;
      }
      this.shortSince ??= nowMs;
      const wait = refillDeferralMs({
        readyWarm: plan.readyCurrent,
        busyRuns: all.filter(isBusyRunPod).length,
        shortSinceMs: this.shortSince,
        nowMs,
        deferMs: this.d.refillDeferMs ?? 0,
      });
      if (wait > 0) return wait;
      this.shortSince = undefined;
      await this.d.policies.ensure(ns);
      await this.d.runtime.ensure(ns);
      for (let i = 0; i < plan.create; i++) {
        const created = await this.d.clients.core.createNamespacedPod({ namespace: ns, body: this.template });
        if (created.metadata?.name) this.expected.created(created.metadata.name, now());
      }
      return undefined;
    } catch (err) {
      this.d.log.warn({ err: apiErrorMessage(err) }, 'Failed to refill the warm pool');
      return undefined;
    } finally {
      this.refilling = false;
    }
  }

  /**
   * Takes a ready pool pod of this version for `owner`: relabels it, sets its owner and deadline,
   * all in one patch guarded by resourceVersion. Undefined when the pool has no ready pod (the
   * caller goes cold).
   */
  async claim(owner: V1OwnerReference, labels: Record<string, string>, deadlineFromNowSeconds: number): Promise<V1Pod | undefined> {
    if (!this.enabled) return undefined;
    const began = performance.now();
    const ready = this.readyPods().sort((a, b) => String(a.metadata?.creationTimestamp).localeCompare(String(b.metadata?.creationTimestamp)));
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
        this.d.onClaim?.('warm', (performance.now() - began) / 1000);
        return claimed;
      } catch (err) {
        // The patch may have landed although its answer was lost (an API server restarting answers
        // a repeated request with a conflict): the pod itself says whose it is. Taking another pod
        // then would leave this one carrying the run too.
        const mine = await this.claimedBy(pod, owner.uid);
        if (mine) {
          this.d.onClaim?.('warm', (performance.now() - began) / 1000);
          return mine;
        }
        // Conflict or gone: someone else got it. Invalid: the pod is older than its lifetime and
        // the claim's deadline would have to rise (the API only lowers it): take another.
        if (isConflict(err) || isNotFound(err) || statusOf(err) === 422) continue;
        throw new Error(`Failed to claim warm pod ${pod.metadata?.name}: ${apiErrorMessage(err)}`, { cause: err });
      }
    }
    this.d.onClaim?.('empty', (performance.now() - began) / 1000);
    return undefined;
  }

  /** The pod as the API server has it now, if `uid` owns it (undefined when it cannot be read). */
  private async claimedBy(pod: V1Pod, uid: string): Promise<V1Pod | undefined> {
    try {
      const now = await this.d.clients.core.readNamespacedPod({ namespace: pod.metadata?.namespace ?? this.d.opts.namespace, name: pod.metadata?.name ?? '' });
      return now.metadata?.ownerReferences?.some((o) => o.uid === uid) ? now : undefined;
    } catch {
      return undefined;
    }
  }

  /** Ready, unclaimed pods of this version, from the informer cache (what a claim can take). */
  readyPods(): V1Pod[] {
    return this.d.pods.list(this.d.opts.namespace).filter((p) => this.isCurrent(p) && podState(p).kind === 'ready');
  }

  /**
   * Deletes an unclaimed pool pod only if it is still the object the decision was made on (uid
   * and resourceVersion preconditions): a pod another replica has just claimed is left alone.
   */
  private async delete(p: V1Pod, cause: RemoveCause): Promise<void> {
    const name = p.metadata?.name ?? '';
    try {
      await this.d.clients.core.deleteNamespacedPod({
        namespace: p.metadata?.namespace ?? this.d.opts.namespace,
        name,
        gracePeriodSeconds: 0,
        body: { preconditions: { uid: p.metadata?.uid, resourceVersion: p.metadata?.resourceVersion } },
      });
      this.d.log.info({ pod: name, cause }, 'Deleted pool Pod');
    } catch (err) {
      if (isConflict(err) || isNotFound(err)) this.d.log.debug({ pod: name, cause }, 'Pool Pod changed or went away before its deletion; left alone');
      else this.d.log.warn({ pod: name, err: apiErrorMessage(err) }, 'Failed to delete pool Pod');
    }
  }
}
