// What should happen to a SandboxRun next, decided from the object and the durable facts around it
// — never from a memory of what this process did before. Pure; the controller acts on the result.
//
// Exactly-once rests on a marker in the API: a run's code can only have started once a pod carries
// the run (the cold pod it owns, or the pool pod its claim patched), or, for a run in a session, once
// its Running status was written. The executor records the outcome before it removes the pod, so a
// run with a marker and no outcome is never started again: it ends Failed with a reason instead.
import type { V1Pod } from '@kubernetes/client-node';
import { ANNOTATION_CLAIMED_AT, ANNOTATION_RESERVED_BY, isTerminalPhase, type SandboxRun } from '../api/v1alpha1/index.js';
import { runPodSeconds } from '../sandbox/deadlines.js';

export type RunDecision =
  /** Terminal and past its TTL. */
  | { kind: 'delete' }
  /** Nothing to do now; look again after `afterMs` when set. */
  | { kind: 'wait'; afterMs?: number }
  /** Ours and provably never started: start it. */
  | { kind: 'execute' }
  /** Nobody executes it yet: claim it (optimistic concurrency), then start it. */
  | { kind: 'claim' }
  /** Its executor is gone, or ours ended without a recorded outcome: record a failure, never re-run. */
  | { kind: 'fail'; message: string };

export interface RunFacts {
  /** This process's identity (the executor annotation it writes). */
  identity: string;
  /** The executor annotation, undefined when no replica has claimed the run. */
  executor: string | undefined;
  /** This process is executing the run or still recording its outcome (memory: only a fast path). */
  busyHere: boolean;
  /**
   * This process sent the run's create and executes it once the answer is in (memory: only a fast
   * path; a lost answer leaves the run to the next look, CREATING_RECHECK_MS later).
   */
  creatingHere: boolean;
  /** The durable marker: the run may have started (see above). */
  started: boolean;
  /** ms until a finished run's TTL ends (terminal runs only). */
  ttlRemainingMs: number | undefined;
  /** ms until the run's whole time budget is over (lostAfterMs). */
  lostAfterMs: number;
  /**
   * The executor is another replica that this process judged gone (replica-liveness.ts: its Lease
   * was deleted or stopped being renewed): its run is failed without waiting out the budget.
   */
  executorGone?: boolean;
  /**
   * The run is an audit record of a session call that already happened (executor AUDIT_EXECUTOR):
   * never executed or claimed, whatever its phase.
   */
  auditRecord?: boolean;
  /** This process started the run already (RunLedger.startedAlready): whatever its status says now. */
  ranHere?: boolean;
  /**
   * The run was claimed to be failed (ANNOTATION_RECOVERING_FROM), by this process or another:
   * the executor it was taken from ('' for none). Such a run is failed again, never executed.
   */
  recoveringFrom?: string;
}

/** A run ours with a marker whose outcome never arrived is looked at again after this long. */
export const RECHECK_MS = 5_000;

/** A run this process is creating is looked at again after this long (its creator executes it first). */
export const CREATING_RECHECK_MS = 1_000;

export const VANISHED_MESSAGE =
  'The gateway replica executing this run stopped before it recorded the outcome; the code may have run, so it is not started again. Run the code again if you need its result.';

export const EXECUTOR_GONE_MESSAGE =
  'The gateway replica executing this run stopped (it no longer renews its replica Lease) before it recorded the outcome; the code may have run, so it is not started again. Run the code again if you need its result.';

/** How far another host's clock may be ahead of this one's (a claim time written there). */
export const CLOCK_SKEW_MS = 60_000;

export const RAN_HERE_MESSAGE =
  'This run was executed already, and its status was removed since; it is not run again. Create a new SandboxRun to run the code again.';

export const NOT_STARTED_MESSAGE =
  'This run was not started within its time budget (counted from its creation, or from when a gateway replica took it up); it is not started now. Create it again to run the code.';

export const AUDIT_INCOMPLETE_MESSAGE =
  'The gateway replica that recorded this session call stopped before it wrote the outcome; the call itself ran once, in its session.';

export function decideRun(run: Pick<SandboxRun, 'status'>, f: RunFacts): RunDecision {
  if (isTerminalPhase(run.status?.phase)) {
    const remaining = f.ttlRemainingMs ?? 0;
    return remaining > 0 ? { kind: 'wait', afterMs: remaining } : { kind: 'delete' };
  }
  // An audit record gets its terminal status right after it is created. If its writer died in
  // between, it is closed as Failed once the call's budget is over (so its TTL can start).
  if (f.auditRecord === true) return f.lostAfterMs > 0 ? { kind: 'wait', afterMs: f.lostAfterMs } : { kind: 'fail', message: AUDIT_INCOMPLETE_MESSAGE };
  if (f.busyHere) return { kind: 'wait' };
  if (f.creatingHere) return { kind: 'wait', afterMs: CREATING_RECHECK_MS };
  // Unclaimed with a marker: someone removed the annotation of a run that may have started.
  if (f.executor === undefined) return f.started ? { kind: 'fail', message: VANISHED_MESSAGE } : { kind: 'claim' };
  // Claimed to be failed (durably: a lost answer, a refused write or a status cleared by hand
  // leaves the claim behind): failed again, whoever holds it now, never executed.
  if (f.recoveringFrom !== undefined && (f.executor === f.identity || f.executorGone === true))
    return { kind: 'fail', message: f.recoveringFrom === '' ? VANISHED_MESSAGE : EXECUTOR_GONE_MESSAGE };
  // Ours and no marker: executed, unless this process ran it already (its status was cleared by
  // hand since) or its budget is over (this process forgets what it ran once that budget is).
  if (f.executor === f.identity && !f.started) {
    if (f.ranHere === true) return { kind: 'fail', message: RAN_HERE_MESSAGE };
    return f.lostAfterMs > 0 ? { kind: 'execute' } : { kind: 'fail', message: NOT_STARTED_MESSAGE };
  }
  // Another replica holds it and is gone: nobody will record its outcome.
  if (f.executor !== f.identity && f.executorGone === true) return { kind: 'fail', message: EXECUTOR_GONE_MESSAGE };
  // Another replica executes it, or this process started it and no longer holds it (its outcome
  // is about to show in the cache, or was never recorded). Wait out the run's whole budget, then
  // record that the outcome is unknown.
  if (f.lostAfterMs > 0) return { kind: 'wait', afterMs: f.executor === f.identity ? Math.min(RECHECK_MS, f.lostAfterMs) : f.lostAfterMs };
  return { kind: 'fail', message: VANISHED_MESSAGE };
}

/**
 * Milliseconds until a finished run should be deleted (≤ 0: now). The administrator's maximum
 * shortens a longer spec.ttlSecondsAfterFinished, so storage is freed whatever a creator asks.
 */
export function ttlRemainingMs(
  run: { spec: { ttlSecondsAfterFinished?: number }; status?: { completionTime?: string } },
  defaultTtlSeconds: number,
  now: Date,
  maxTtlSeconds = Infinity,
): number | undefined {
  const done = run.status?.completionTime;
  if (!done) return undefined;
  const ttl = Math.min(run.spec.ttlSecondsAfterFinished ?? defaultTtlSeconds, maxTtlSeconds);
  return Date.parse(done) + ttl * 1000 - now.getTime();
}

/**
 * Where a run's time budget starts: its creation, or its claim (ANNOTATION_CLAIMED_AT) when that
 * is later, a valid time and not ahead of `now` by more than the clocks of two hosts may differ
 * (otherwise the creation: a claim time set by hand far ahead would keep a run from ever being lost).
 */
export function budgetStart(meta: { creationTimestamp?: string; annotations?: Record<string, string> }, now: Date): number {
  const created = Date.parse(meta.creationTimestamp ?? now.toISOString());
  const claimed = Date.parse(meta.annotations?.[ANNOTATION_CLAIMED_AT] ?? '');
  return Number.isFinite(claimed) && claimed > created && claimed <= now.getTime() + CLOCK_SKEW_MS ? claimed : created;
}

/**
 * How long a run may stay non-terminal before any replica may declare it lost (its executor
 * crashed, or never judged gone): as long as its pod may live (sandbox/deadlines.ts); a run in a
 * session may also wait for the session's packages (`packagesTimeoutSeconds`, see
 * sessions/state.ts startingUntil). Pure time math.
 */
export function lostAfterMs(
  run: { metadata: { creationTimestamp?: string; annotations?: Record<string, string> }; spec: { timeoutSeconds: number; session?: string | undefined } },
  podStartupTimeoutSeconds: number,
  now: Date,
  packagesTimeoutSeconds = 0,
): number {
  const created = budgetStart(run.metadata, now);
  const packages = run.spec.session !== undefined ? packagesTimeoutSeconds : 0;
  const budget = runPodSeconds(podStartupTimeoutSeconds + packages, run.spec.timeoutSeconds) * 1000;
  return created + budget - now.getTime();
}

/**
 * The live pods that may carry a run whose executor is gone, whose kernels are asked for its
 * outcome (RunExecutor.recover): the pods the run owns (its cold pod, or the pool pod its claim
 * patched) or, without one, the pool pods its executor had reserved (`reservedBy`: that
 * replica's reservation hash, an annotation) — a warm run's code starts
 * in one before the pod is made the run's. A pod being deleted can no longer be asked.
 */
export function podsThatMayCarry(pods: readonly V1Pod[], runUid: string | undefined, reservedBy: string | undefined): string[] {
  const live = pods.filter((p) => p.metadata?.deletionTimestamp === undefined);
  const owned = live.filter((p) => runUid !== undefined && p.metadata?.ownerReferences?.some((o) => o.uid === runUid));
  const mine = (p: V1Pod): boolean => reservedBy !== undefined && p.metadata?.annotations?.[ANNOTATION_RESERVED_BY] === reservedBy;
  const carriers = owned.length > 0 ? owned : live.filter(mine);
  return carriers.map((p) => p.metadata?.name ?? '').filter((name) => name !== '');
}
