// Pure decisions of the warm pool: which pool pods to delete (stale version, failed, too old,
// surplus, or all of them when the pool is drained) and how many to create. The leader applies
// them; every delete it makes carries the pod's uid and resourceVersion as preconditions.
import type { V1Pod } from '@kubernetes/client-node';
import { ANNOTATION_RESERVED_BY, BUILTIN_PROFILE, LABEL_PROFILE, SANDBOXRUN_KIND } from '../api/v1alpha1/index.js';
import { LABEL_POOL, LABEL_POOL_HASH } from '../sandbox/pod.js';
import { podState } from '../sandbox/pod-state.js';
import { runPodSeconds, sessionPodSeconds } from '../sandbox/deadlines.js';

/**
 * The replica (its reservation hash) that reserved a pool pod, if one did: the annotation of one
 * still labelled `warm` (labels.ts, ANNOTATION_RESERVED_BY).
 */
export function reservedBy(p: V1Pod): string | undefined {
  return p.metadata?.labels?.[LABEL_POOL] === 'warm' ? p.metadata.annotations?.[ANNOTATION_RESERVED_BY] : undefined;
}

/** An unclaimed, unreserved pool pod, any version, not being deleted. */
export const isWarm = (p: V1Pod): boolean => p.metadata?.labels?.[LABEL_POOL] === 'warm' && reservedBy(p) === undefined && !p.metadata.deletionTimestamp;

/** The profile a sandbox pod was built from (pods without the label: the built-in one's). */
export const profileOf = (p: V1Pod): string => p.metadata?.labels?.[LABEL_PROFILE] ?? BUILTIN_PROFILE;

/** A pool pod one gateway process reserved for its next warm run (pool-reservation.ts). */
export const isReserved = (p: V1Pod): boolean => reservedBy(p) !== undefined && !p.metadata?.deletionTimestamp;
/** A pool pod (any version, claimed or not): it carries the hash of its template. */
export const isPoolPod = (p: V1Pod): boolean => p.metadata?.labels?.[LABEL_POOL_HASH] !== undefined;

/** A transient run executing right now in a pod it claimed from the pool. */
export const isBusyRunPod = (p: V1Pod): boolean =>
  p.metadata?.labels?.[LABEL_POOL] === 'claimed' && !p.metadata.deletionTimestamp && (p.metadata.ownerReferences ?? []).some((o) => o.kind === SANDBOXRUN_KIND);

export type RemoveCause = 'stale' | 'failed' | 'expired' | 'surplus';

export interface PoolPlan {
  create: number;
  remove: Array<{ pod: V1Pod; cause: RemoveCause }>;
  /** Ready unclaimed pods of the current version that stay. */
  readyCurrent: number;
}

export interface PlanInput {
  /** Hash of the template this operator builds (LABEL_POOL_HASH). */
  hash: string;
  target: number;
  nowMs: number;
  /** Unclaimed pods older than this are replaced, so a claim always fits in their deadline. */
  maxAgeMs: number;
  /** Pods created but not yet shown by the informer (CreateExpectations). */
  pending: number;
}

/** A pod's creation time by the API server's clock, in ms. */
export const createdMs = (p: V1Pod): number => new Date(p.metadata?.creationTimestamp ?? 0).getTime();

/** Pure: what the leader should do to bring the unclaimed pool pods to `target` of this version. */
export function planPool(pods: readonly V1Pod[], p: PlanInput): PoolPlan {
  const remove: PoolPlan['remove'] = [];
  const keep: V1Pod[] = [];
  // A reservation whose process died ends at the deadline the reservation set: the pod fails.
  for (const pod of pods.filter(isReserved)) if (podState(pod).kind === 'failed') remove.push({ pod, cause: 'failed' });
  for (const pod of pods.filter(isWarm)) {
    if (pod.metadata?.labels?.[LABEL_POOL_HASH] !== p.hash) remove.push({ pod, cause: 'stale' });
    else if (podState(pod).kind === 'failed') remove.push({ pod, cause: 'failed' });
    else if (p.nowMs - createdMs(pod) > p.maxAgeMs) remove.push({ pod, cause: 'expired' });
    else keep.push(pod);
  }
  const target = Math.max(0, p.target);
  // Surplus: give up pods still starting first (nobody can use them yet), then the oldest.
  const order = [...keep].sort((a, b) => Number(podState(a).kind === 'ready') - Number(podState(b).kind === 'ready') || createdMs(a) - createdMs(b));
  const surplus = order.slice(0, Math.max(0, keep.length - target));
  for (const pod of surplus) remove.push({ pod, cause: 'surplus' });
  const stay = keep.filter((x) => !surplus.includes(x));
  return {
    create: Math.max(0, target - stay.length - p.pending),
    remove,
    readyCurrent: stay.filter((x) => podState(x).kind === 'ready').length,
  };
}

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
 * Pure: how long a claim that found no ready pool pod may wait for one of this version's pods still
 * starting, or undefined to go cold now. A pool pod that is starting was created before any cold
 * pod this claim could create, from the same template, so it is ready first; cold also adds a pod
 * to a node that is busy starting the pool's. The claims of this process already waiting count on
 * `waiting` of those pods; a pod still not ready `limitMs` after its creation is not waited for
 * (stuck: an image pull, no room on the node), and no claim waits longer than `limitMs` in all
 * (creation times are the API server's clock).
 */
export function startingPodWaitMs(p: {
  startingCreatedMs: readonly number[];
  waiting: number;
  nowMs: number;
  waitedMs: number;
  limitMs: number;
}): number | undefined {
  const left = p.limitMs - p.waitedMs;
  if (left <= 0) return undefined;
  // Youngest first: the claim may wait while more young pods are starting than claims wait.
  const ages = p.startingCreatedMs.map((c) => Math.max(0, p.nowMs - c)).filter((age) => age < p.limitMs);
  const age = ages.sort((a, b) => a - b)[p.waiting];
  return age === undefined ? undefined : Math.min(left, p.limitMs - age);
}

/**
 * Pure: activeDeadlineSeconds of a pool pod. Kubernetes lets a claim only lower a pod's deadline,
 * so it must cover the pool lifetime plus the longest claim (a session's maximum lifetime or a
 * run's start-up plus maximum timeout); an abandoned pod (operator uninstalled) still ends.
 */
export function poolPodDeadlineSeconds(p: {
  poolLifetimeSeconds: number;
  sessionMaxLifetimeSeconds: number;
  podStartupTimeoutSeconds: number;
  maxTimeoutSeconds: number;
}): number {
  const longestClaim = Math.max(sessionPodSeconds(p.sessionMaxLifetimeSeconds), runPodSeconds(p.podStartupTimeoutSeconds, p.maxTimeoutSeconds));
  return p.poolLifetimeSeconds + longestClaim;
}

/** Pure: seconds from a pod's creation to its Ready condition, undefined if not ready. */
export function readySeconds(p: V1Pod): number | undefined {
  const ready = p.status?.conditions?.find((c) => c.type === 'Ready' && c.status === 'True');
  if (!ready?.lastTransitionTime || !p.metadata?.creationTimestamp) return undefined;
  const s = (new Date(ready.lastTransitionTime).getTime() - new Date(p.metadata.creationTimestamp).getTime()) / 1000;
  return Number.isFinite(s) && s >= 0 ? s : undefined;
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
