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
import {
  API_VERSION,
  LABEL_MANAGED_BY,
  ANNOTATION_RESERVED_BY,
  LABEL_RUN,
  LABEL_RUNTIME,
  LABEL_SESSION,
  MANAGED_BY_VALUE,
  SANDBOXPROFILE_KIND,
} from '../api/v1alpha1/index.js';
import { kernelCommand } from '../exec/kernel.js';
import { apiErrorMessage, isConflict, isNotFound, statusOf, type KubeClients } from '../kube/clients.js';
import { LABEL_POOL, LABEL_POOL_HASH, POOL_LANGUAGE, SANDBOX_CONTAINER, buildPoolPod, sandboxPodOptions } from '../sandbox/pod.js';
import type { RuntimeVolume } from '../sandbox/runtime-configmap.js';
import { parseQuantity } from '../config/quantity.js';
import type { ResilientInformer } from '../kube/informer.js';
import type { NetworkPolicyGuard } from './network-policy.js';
import type { ControllerOptions } from './options.js';
import { builtinProfile, type ResolvedProfile } from '../profiles/profile.js';
import {
  CreateExpectations,
  createdMs,
  isBusyRunPod,
  isWarm,
  planPool,
  poolPodDeadlineSeconds,
  profileOf,
  refillDeferralMs,
  startingPodWaitMs,
  type RemoveCause,
} from './pool-plan.js';
import type { RuntimeConfigMapGuard } from './runtime-guard.js';
import { podState } from '../sandbox/pod-state.js';
import { PoolReservation } from './pool-reservation.js';
import { runPodSeconds } from '../sandbox/deadlines.js';

export { CreateExpectations, refillDeferralMs } from './pool-plan.js';

/** Unclaimed pool pods are replaced after this long (their deadline renewed by replacement). */
export const POOL_POD_LIFETIME_SECONDS = 3600;
/**
 * A claim that found no ready pod waits for a starting one of its pool at most this long, and not
 * for a pod this long after its creation (stuck): several times a pod's start on a busy node.
 */
export const STARTING_POD_WAIT_MS = 10_000;

export interface WarmPoolDeps {
  clients: KubeClients;
  opts: ControllerOptions;
  /** The profile whose pool this is (default: the built-in one, made of `opts`). */
  profile?: ResolvedProfile;
  /** Smallest pool demand may shrink it to (default 0). */
  min?: number;
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
   * Pods a claim takes first: those whose kernel this process already reached (a pod is Ready as
   * soon as its container runs; its kernel may still be importing a profile's modules).
   */
  preferred?: (p: V1Pod) => boolean;
  /** The clock refills judge pod age by (tests fix it); Date.now by default. */
  now?: () => number;
  /** Keep one ready pod reserved for this process's next warm run (pool-reservation.ts). */
  reserve?: boolean;
}

export function poolSelector(): string {
  return `${LABEL_MANAGED_BY}=${MANAGED_BY_VALUE},${LABEL_POOL}`;
}

/** How long a created pool pod may stay unseen by the informer before it is no longer expected. */
const EXPECTATION_TTL_MS = 30_000;

/**
 * A profile's pool pod as this operator builds it: pure, so its hash is the same in every replica
 * of a version. A SandboxProfile owns its pool pods (deleting it deletes them; a claim replaces the
 * owner with the run or session).
 */
export function poolPodTemplate(opts: ControllerOptions, runtime: RuntimeVolume, profile: ResolvedProfile = builtinProfile(opts)): V1Pod {
  const o = { ...opts, ...profile.shape };
  const deadline = poolPodDeadlineSeconds({ poolLifetimeSeconds: POOL_POD_LIFETIME_SECONDS, ...o });
  const build = sandboxPodOptions(o, { image: o.images[POOL_LANGUAGE], activeDeadlineSeconds: deadline, profile: profile.name });
  const owner = profile.uid === undefined ? undefined : { apiVersion: API_VERSION, kind: SANDBOXPROFILE_KIND, name: profile.name, uid: profile.uid };
  const kernel = kernelCommand(POOL_LANGUAGE, { prestart: true, preImport: profile.preImport });
  return buildPoolPod(opts.namespace, POOL_LANGUAGE, build, kernel, runtime, owner);
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
  /** The pool's pod as this operator makes it, for its shape; each create builds a new one (newPod). */
  private readonly template: V1Pod;
  /** The hash of this operator's pool pods: only these are claimed. */
  readonly hash: string;
  readonly profile: ResolvedProfile;

  private readonly reservation: PoolReservation | undefined;
  /** Claims of this process waiting for a starting pod, and how to wake them. */
  private waiting = 0;
  private readonly changeWaiters = new Set<() => void>();
  /** Set when a changed or deleted profile replaced this pool (retire): it claims no pod of its own again. */
  private retirement: { successor: WarmPool | undefined } | undefined;

  constructor(private readonly d: WarmPoolDeps) {
    this.profile = d.profile ?? builtinProfile(d.opts);
    this.template = this.newPod();
    this.hash = this.template.metadata?.labels?.[LABEL_POOL_HASH] ?? '';
    this.reservation =
      d.reserve && d.max > 0
        ? new PoolReservation({
            clients: d.clients,
            pods: d.pods,
            namespace: d.opts.namespace,
            identity: d.opts.identity,
            log: d.log,
            hash: this.hash,
            candidates: () => this.claimOrder(),
            longestRunSeconds: runPodSeconds(d.opts.podStartupTimeoutSeconds, d.opts.maxTimeoutSeconds),
            ...(d.now && { now: d.now }),
          })
        : undefined;
  }
  /**
   * A pool pod to create: the template's shape with a user of its own. Each sandbox pod runs as its
   * own user (sandboxUid: the kernel counts inotify instances, message queue bytes and pipe pages
   * per user across the node); one template object for every create made all of a pool's pods one
   * user. The hash leaves the user out, so every one of them is of this pool's shape.
   */
  private newPod(): V1Pod {
    return poolPodTemplate(this.d.opts, this.d.runtime.volume, this.profile);
  }

  /** Reserves a ready pod for this process's next warm run, in the background (no-op when off, held or retired). */
  ensureReserved(): void {
    if (!this.retirement) this.reservation?.ensure();
  }

  /**
   * A changed profile replaced this pool by `successor` (a deleted one by none): its pods are of a
   * version no longer served. Claims in flight here, waiting for a starting pod of that version,
   * go on in the successor at once (or give up, without one) instead of waking at their timer and
   * taking an old pod; so does a claim made later through a reference to this pool.
   */
  retire(successor: WarmPool | undefined): Promise<void> {
    this.retirement = { successor };
    this.podChanged();
    return this.releaseReservation();
  }

  /**
   * This process's reserved pod, for one run, when it can run code now (see PoolReservation.take).
   * A reservation on its way (made when the previous run ended, its patch in flight) is waited
   * for: it lands sooner than a claim started now would.
   */
  async takeReserved(): Promise<V1Pod | undefined> {
    await this.reservation?.inFlight();
    const pod = this.reservation?.take();
    if (pod) this.d.onClaim?.('warm', 0);
    return pod;
  }

  /** Gives the reservation up (shutdown, this pool replaced by a changed profile). */
  releaseReservation(): Promise<void> {
    return this.reservation?.release() ?? Promise.resolve();
  }

  /**
   * Makes a reserved pod its run's, as a claim would have: the run's labels, `claimed`, the run as
   * owner (deleting the run deletes the pod) and the run's deadline. No resourceVersion guard: the
   * pod is already this process's alone. Sent with the run's Running status, or once its
   * outcome is known.
   */
  async adopt(pod: V1Pod, owner: V1OwnerReference, labels: Record<string, string>, deadlineFromNowSeconds: number): Promise<void> {
    const started = pod.status?.startTime ? new Date(pod.status.startTime).getTime() : Date.now();
    const age = Math.max(0, Math.ceil((Date.now() - started) / 1000));
    const deadline = Math.min(pod.spec?.activeDeadlineSeconds ?? Infinity, age + deadlineFromNowSeconds);
    await this.d.clients.core.patchNamespacedPod(
      {
        namespace: pod.metadata?.namespace ?? this.d.opts.namespace,
        name: pod.metadata?.name ?? '',
        body: {
          // The reservation goes.
          metadata: {
            labels: { ...labels, [LABEL_POOL]: 'claimed' },
            annotations: { [ANNOTATION_RESERVED_BY]: null },
            ownerReferences: [owner],
          },
          spec: { activeDeadlineSeconds: deadline },
        },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }

  /** Ready pods a claim or a reservation tries, best first: those whose kernel this process reached, each group from a random start. */
  private claimOrder(): V1Pod[] {
    return this.inClaimOrder(this.readyPods());
  }

  private inClaimOrder(ready: V1Pod[]): V1Pod[] {
    const all = [...ready].sort((a, b) => String(a.metadata?.creationTimestamp).localeCompare(String(b.metadata?.creationTimestamp)));
    // Replicas claiming at once would all start with the oldest pod; a random start spreads them.
    const rotated = (list: V1Pod[]): V1Pod[] => {
      const start = list.length > 0 ? Math.floor(Math.random() * list.length) : 0;
      return [...list.slice(start), ...list.slice(0, start)];
    };
    const preferred = this.d.preferred ?? (() => false);
    return [...rotated(all.filter(preferred)), ...rotated(all.filter((p) => !preferred(p)))];
  }

  /** The profile's name (pods carry it as LABEL_PROFILE). */
  get name(): string {
    return this.profile.name;
  }

  get min(): number {
    return Math.min(this.d.min ?? 0, this.d.max);
  }

  get max(): number {
    return this.d.max;
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
    if (!this.enabled || labels[LABEL_POOL] !== undefined || profileOf(p) !== this.name) return false;
    // Any run may use a pool pod (its kernel starts any language); a session only a python one.
    const fits = labels[LABEL_RUN] !== undefined || (labels[LABEL_SESSION] !== undefined && labels[LABEL_RUNTIME] === POOL_LANGUAGE);
    if (!fits) return false;
    const want = this.template.spec?.containers[0];
    const got = p.spec?.containers.find((c) => c.name === SANDBOX_CONTAINER);
    return !!want && !!got && got.image === want.image && sameQuantities(got.resources?.limits, want.resources?.limits);
  }

  /** A ready-or-starting unclaimed pod of this pool's version. */
  isCurrent(p: V1Pod): boolean {
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
      // Other profiles' pods are theirs (pods of a profile that is gone: PoolController.orphans).
      const plan = planPool(
        all.filter((p) => profileOf(p) === this.name),
        { hash: this.hash, target, nowMs, maxAgeMs: POOL_POD_LIFETIME_SECONDS * 1000, pending },
      );
      for (const { pod, cause } of plan.remove) await deletePoolPod(this.d.clients, pod, cause, this.d.log);
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
      const isolatedAtStart = this.d.policies.createdAfterEnsure(ns);
      await this.d.runtime.ensure(ns);
      for (let i = 0; i < plan.create; i++) {
        const created = await this.d.clients.core.createNamespacedPod({ namespace: ns, body: this.newPod() });
        if (!created.metadata?.name) continue;
        this.expected.created(created.metadata.name, now());
        isolatedAtStart(created.metadata.name);
      }
      return undefined;
    } catch (err) {
      this.d.log.warn({ profile: this.name, err: apiErrorMessage(err) }, 'Failed to refill the warm pool');
      return undefined;
    } finally {
      this.refilling = false;
    }
  }

  /**
   * Takes a ready pool pod of this version for `owner`: relabels it, sets its owner and deadline,
   * all in one patch guarded by resourceVersion. When none is ready but one of this version is
   * starting, waits for it (startingPodWaitMs: it is ready before a cold pod created now would be).
   * Undefined when the pool has no pod for this claim (the caller goes cold); when the cache may be
   * behind (a pod it shows starting), the API server's list is tried first.
   */
  claim(owner: V1OwnerReference, labels: Record<string, string>, deadlineFromNowSeconds: number): Promise<V1Pod | undefined> {
    return this.claimSince(performance.now(), owner, labels, deadlineFromNowSeconds);
  }

  /** claim, counting the wait from `began` (a claim handed on by a retired pool keeps its time). */
  private async claimSince(began: number, owner: V1OwnerReference, labels: Record<string, string>, deadlineFromNowSeconds: number): Promise<V1Pod | undefined> {
    for (;;) {
      if (this.retirement) {
        const next = this.retirement.successor;
        if (next) return next.claimSince(began, owner, labels, deadlineFromNowSeconds);
        break;
      }
      if (!this.enabled) return undefined;
      const pod = await this.claimReady(owner, labels, deadlineFromNowSeconds);
      if (pod) {
        this.d.onClaim?.('warm', (performance.now() - began) / 1000);
        return pod;
      }
      const wait = startingPodWaitMs({
        startingCreatedMs: this.startingPods().map(createdMs),
        waiting: this.waiting,
        nowMs: (this.d.now ?? Date.now)(),
        waitedMs: performance.now() - began,
        limitMs: STARTING_POD_WAIT_MS,
      });
      if (wait === undefined) {
        // The cache can be behind the API server: a pod it shows starting (or one this leader
        // created that it does not show yet) may be ready there already, and a starting pod older
        // than the wait's limit is not waited for. Before the caller goes cold, the API server is
        // asked once; a pool with nothing starting goes cold without the request.
        const live = this.mayBeBehind() ? await this.claimReady(owner, labels, deadlineFromNowSeconds, await this.readyLive()) : undefined;
        if (live) {
          this.d.onClaim?.('warm', (performance.now() - began) / 1000);
          return live;
        }
        break;
      }
      this.waiting += 1;
      try {
        await this.poolChange(wait);
      } finally {
        this.waiting -= 1;
      }
    }
    this.d.onClaim?.('empty', (performance.now() - began) / 1000);
    return undefined;
  }

  /** Whether the cache may not show a pod of this version that is ready: one it shows starting, or one created and not seen yet. */
  private mayBeBehind(): boolean {
    const all = this.d.pods.list(this.d.opts.namespace);
    if (all.some((p) => this.isCurrent(p) && podState(p).kind === 'pending')) return true;
    return (
      this.expected.pending(
        all.map((p) => p.metadata?.name ?? ''),
        (this.d.now ?? Date.now)(),
      ) > 0
    );
  }

  /** Ready, unclaimed pods of this version as the API server lists them now, in the claim's order. */
  private async readyLive(): Promise<V1Pod[]> {
    let items: V1Pod[];
    try {
      ({ items } = await this.d.clients.core.listNamespacedPod({
        namespace: this.d.opts.namespace,
        labelSelector: `${LABEL_POOL}=warm,${LABEL_POOL_HASH}=${this.hash}`,
      }));
    } catch (err) {
      // Unanswered: the caller goes cold, as it would have without asking.
      this.d.log.debug({ profile: this.name, err: apiErrorMessage(err) }, 'Could not list the pool pods');
      return [];
    }
    return this.inClaimOrder(this.readyOf(items));
  }

  /** One pass over the ready pods (the cache's unless given): the first whose claim patch succeeds. */
  private async claimReady(
    owner: V1OwnerReference,
    labels: Record<string, string>,
    deadlineFromNowSeconds: number,
    pods: V1Pod[] = this.claimOrder(),
  ): Promise<V1Pod | undefined> {
    for (const pod of pods) {
      const started = pod.status?.startTime ? new Date(pod.status.startTime).getTime() : Date.now();
      const age = Math.max(0, Math.ceil((Date.now() - started) / 1000));
      try {
        return await this.d.clients.core.patchNamespacedPod(
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
      } catch (err) {
        // The patch may have landed although its answer was lost (an API server restarting answers
        // a repeated request with a conflict): the pod itself says whose it is. Taking another pod
        // then would leave this one carrying the run too.
        const mine = await this.claimedBy(pod, owner.uid);
        if (mine) return mine;
        // Conflict or gone: someone else got it. Invalid: the pod is older than its lifetime and
        // the claim's deadline would have to rise (the API only lowers it): take another.
        if (isConflict(err) || isNotFound(err) || statusOf(err) === 422) continue;
        throw new Error(`Failed to claim warm pod ${pod.metadata?.name}: ${apiErrorMessage(err)}`, { cause: err });
      }
    }
    return undefined;
  }

  /** Unclaimed pods of this version still starting, and schedulable (what a claim may wait for). */
  private startingPods(): V1Pod[] {
    return this.d.pods.list(this.d.opts.namespace).filter((p) => {
      if (!this.isCurrent(p)) return false;
      const state = podState(p);
      return state.kind === 'pending' && !state.message.startsWith('Unschedulable');
    });
  }

  /** Resolves at the next change of one of this pool's pods (see podChanged), or after `ms`. */
  private poolChange(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.changeWaiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.changeWaiters.add(done);
    });
  }

  /**
   * One of this pool's pods changed in the informer (PoolSet feeds it every pod event of the
   * profile): claims waiting for a starting pod look again, and so does a reservation that found
   * no ready pod when the last warm run ended — only while no claim waits: the pod becoming ready
   * is the waiting claim's (its caller is there now; the reservation is for a later call).
   */
  podChanged(): void {
    const claimsWaiting = this.waiting > 0;
    for (const wake of [...this.changeWaiters]) wake();
    if (!this.retirement && !claimsWaiting) this.reservation?.retry();
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
    return this.readyOf(this.d.pods.list(this.d.opts.namespace));
  }

  /** The ready, unclaimed pods of this version among `pods` (the cache's, or the API server's list). */
  private readyOf(pods: readonly V1Pod[]): V1Pod[] {
    return pods.filter((p) => this.isCurrent(p) && podState(p).kind === 'ready');
  }
}

/**
 * Deletes an unclaimed pool pod only if it is still the object the decision was made on (uid
 * and resourceVersion preconditions): a pod another replica has just claimed is left alone.
 */
export async function deletePoolPod(clients: KubeClients, p: V1Pod, cause: RemoveCause, log: Logger): Promise<void> {
  const name = p.metadata?.name ?? '';
  try {
    await clients.core.deleteNamespacedPod({
      namespace: p.metadata?.namespace ?? '',
      name,
      gracePeriodSeconds: 0,
      body: { preconditions: { uid: p.metadata?.uid, resourceVersion: p.metadata?.resourceVersion } },
    });
    log.info({ pod: name, cause }, 'Deleted pool Pod');
  } catch (err) {
    if (isConflict(err) || isNotFound(err)) log.debug({ pod: name, cause }, 'Pool Pod changed or went away before its deletion; left alone');
    else log.warn({ pod: name, err: apiErrorMessage(err) }, 'Failed to delete pool Pod');
  }
}
