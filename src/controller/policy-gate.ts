// Pure time math for the NetworkPolicy gate: whether a sandbox may start now, and since when the
// policy counts as enforced. Kept apart from the controller so it is tested as a table.
import type { V1NetworkPolicy } from '@kubernetes/client-node';

/**
 * What the gate says: 'open' (start the sandbox), 'wait' `ms` more (the policy is back but the CNI
 * may not have programmed it yet), or 'closed' (the policy is missing or altered: wait for the
 * controller to restore it).
 */
export type GateState = { kind: 'open' } | { kind: 'wait'; ms: number } | { kind: 'closed' };

/**
 * Pure: the gate for a policy in place since `inPlaceSinceMs` (undefined: not in place). A policy
 * that was just created or restored is enforced only once the CNI has programmed it (kube-router
 * re-syncs its iptables rules after the watch event): until `settleMs` have passed a new sandbox
 * would start unprotected, so it waits.
 */
export function gateState(inPlaceSinceMs: number | undefined, nowMs: number, settleMs: number): GateState {
  if (inPlaceSinceMs === undefined) return { kind: 'closed' };
  const left = inPlaceSinceMs + settleMs - nowMs;
  return left > 0 ? { kind: 'wait', ms: left } : { kind: 'open' };
}

/**
 * Pure: whether code about to start must first check, in its own pod, that the pod has no network
 * (the kernels' `netcheck`): while the policy is not in place, and for `windowMs` after it came
 * back. The settling wait above is a guess at the CNI's delay; under load kube-router re-programs
 * later than that, and only the pod itself can tell. Never asked when the policy has been in place
 * for long, so the steady state pays nothing.
 */
export function inPodCheckDue(inPlaceSinceMs: number | undefined, nowMs: number, windowMs: number): boolean {
  return inPlaceSinceMs === undefined || nowMs - inPlaceSinceMs < windowMs;
}

/**
 * Pure: when a policy first seen in place (at start-up, from the informer's list) was last
 * written, by the API server's clock: the newest of its creation and managed-fields times. Those
 * have one-second resolution, so a second is added (a policy written 0.9 s ago must not look
 * settled early); never later than `nowMs` (clock skew).
 */
export function lastWrittenMs(policy: V1NetworkPolicy, nowMs: number): number {
  const times = [policy.metadata?.creationTimestamp, ...(policy.metadata?.managedFields ?? []).map((f) => f.time)]
    .map((t) => (t === undefined ? NaN : new Date(t).getTime()))
    .filter((t) => Number.isFinite(t));
  if (times.length === 0) return nowMs;
  return Math.min(nowMs, Math.max(...times) + 1000);
}
