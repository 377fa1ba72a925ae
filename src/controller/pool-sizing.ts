// How many warm pods the pool should hold: enough to cover the claims that arrive while a
// replacement starts (claims per second × time to ready), plus headroom for bursts, between the
// configured minimum and maximum. Demand is observed from the pod informer (a pool pod relabelled
// `claimed`, or reserved for a replica's next warm run), so the leader sees every replica's
// claims. Time is a parameter everywhere.
import type { V1Pod } from '@kubernetes/client-node';
import { LABEL_POOL } from '../sandbox/pod.js';
import { isPoolPod, isReserved, readySeconds } from './pool-plan.js';

/** Extra pods on top of rate × time to ready, as a fraction: bursts and estimation lag. */
export const POOL_HEADROOM = 0.5;
/** Time constant of the claim rate: a burst counts at once and fades over tens of seconds. */
export const CLAIM_RATE_TAU_MS = 5_000;
/** A larger pool is kept this long after demand fell (scale-down stabilisation, as the HPA does). */
export const SCALE_DOWN_WINDOW_MS = 120_000;
/** Time to ready assumed before any pool pod was seen becoming ready. */
export const INITIAL_READY_SECONDS = 2;

export interface PoolSizeInput {
  min: number;
  max: number;
  claimsPerSecond: number;
  readySeconds: number;
  headroom?: number;
}

/** Pure: the pool size for this demand, clamped to [min, max]; 0 when max is 0 (pool drained). */
export function desiredPoolSize(p: PoolSizeInput): number {
  if (p.max <= 0) return 0;
  const demand = Math.max(0, p.claimsPerSecond) * Math.max(0, p.readySeconds) * (1 + (p.headroom ?? POOL_HEADROOM));
  // The epsilon keeps float noise (2.0000000001) from asking for a whole extra pod.
  const need = Math.ceil(demand - 1e-9);
  return Math.min(p.max, Math.max(p.min, need));
}

export interface Stabilized {
  size: number;
  sinceMs: number;
}

/** Pure: grow at once; shrink only once the larger size is older than `windowMs`. */
export function stabilize(prev: Stabilized | undefined, next: number, nowMs: number, windowMs = SCALE_DOWN_WINDOW_MS): Stabilized {
  if (!prev || next >= prev.size || nowMs - prev.sinceMs >= windowMs) return { size: next, sinceMs: nowMs };
  return prev;
}

/** An exponentially decaying event rate (events per second), as load averages are computed. */
export class DecayingRate {
  private value = 0;
  private atMs = 0;

  constructor(private readonly tauMs = CLAIM_RATE_TAU_MS) {}

  add(nowMs: number): void {
    this.value = this.perSecond(nowMs) + 1000 / this.tauMs;
    this.atMs = Math.max(this.atMs, nowMs);
  }

  perSecond(nowMs: number): number {
    const elapsed = Math.max(0, nowMs - this.atMs);
    return this.value * Math.exp(-elapsed / this.tauMs);
  }
}

/** A moving average of samples (time to ready), starting from a prior. */
export class MovingAverage {
  constructor(
    private value: number,
    private readonly weight = 0.2,
  ) {}

  add(sample: number): void {
    this.value += this.weight * (sample - this.value);
  }

  get current(): number {
    return this.value;
  }
}

/** Pods remembered as already counted; far above any namespace's live sandbox pods. */
const MAX_TRACKED_PODS = 20_000;
/** Time to ready samples are capped here: one pod stuck on an image pull must not size the pool. */
const MAX_READY_SAMPLE_SECONDS = 60;

/**
 * The demand on the pool as the leader's pod informer shows it, whatever replica claimed: claims
 * (pool pods relabelled `claimed` or reserved, each pod once) and cold pods the pool could have
 * served (a run or session pod of the pool's image and limits: a claim that found the pool empty)
 * as a decaying rate, and time to ready (creation → Ready of pool pods) as a moving average. Pods
 * already there when the informer first listed them are not counted (they may be hours old).
 */
export class PoolDemand {
  private readonly claims = new DecayingRate();
  private readonly ready = new MovingAverage(INITIAL_READY_SECONDS);
  private readonly seenClaimed = new Set<string>();
  private readonly seenReady = new Set<string>();
  private primed = false;
  private stable: Stabilized | undefined;

  /** `couldServe`: whether a cold pod is one a pool pod could have been used for. */
  constructor(private readonly couldServe: (p: V1Pod) => boolean = () => false) {}

  /** From now on, a newly seen claim counts (call once the informer has listed). */
  prime(): void {
    this.primed = true;
  }

  observe(p: V1Pod, nowMs: number): void {
    const uid = p.metadata?.uid;
    if (!uid) return;
    // Forgotten on delete events; a relisting informer may skip some, so never let them pile up.
    if (this.seenClaimed.size > MAX_TRACKED_PODS) this.seenClaimed.clear();
    if (this.seenReady.size > MAX_TRACKED_PODS) this.seenReady.clear();
    const pool = isPoolPod(p);
    // A reservation takes a pod out of the pool as a claim does (one per warm run: the run that
    // takes it reserves the next), and a short run's reserved pod is never relabelled `claimed`.
    const demand = pool ? p.metadata?.labels?.[LABEL_POOL] === 'claimed' || isReserved(p) : this.couldServe(p);
    if (demand && !this.seenClaimed.has(uid)) {
      this.seenClaimed.add(uid);
      if (this.primed) this.claims.add(nowMs);
    }
    if (!pool) return;
    const s = readySeconds(p);
    if (s !== undefined && !this.seenReady.has(uid)) {
      this.seenReady.add(uid);
      this.ready.add(Math.min(s, MAX_READY_SAMPLE_SECONDS));
    }
  }

  forget(p: V1Pod): void {
    const uid = p.metadata?.uid ?? '';
    this.seenClaimed.delete(uid);
    this.seenReady.delete(uid);
  }

  get readySeconds(): number {
    return this.ready.current;
  }

  claimsPerSecond(nowMs: number): number {
    return this.claims.perSecond(nowMs);
  }

  /**
   * The pool size to keep now: demand-sized, grown at once, shrunk after the window.
   * `extraLeadSeconds`: how long a replacement may wait before it is started (refill deferral).
   */
  target(bounds: { min: number; max: number }, nowMs: number, extraLeadSeconds = 0): number {
    if (bounds.max <= 0) return 0; // drained at once, not after the window
    const next = desiredPoolSize({ ...bounds, claimsPerSecond: this.claimsPerSecond(nowMs), readySeconds: this.readySeconds + extraLeadSeconds });
    this.stable = stabilize(this.stable, next, nowMs);
    return this.stable.size;
  }
}
