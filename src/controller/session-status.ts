// Pure status computation for SandboxSessions.
import type { V1Pod } from '@kubernetes/client-node';
import {
  CONDITION_READY,
  Reasons,
  SessionReasons,
  boundMessages,
  setCondition,
  type SandboxSession,
  type SandboxSessionStatus,
} from '../api/v1alpha1/index.js';
import { podState } from '../sandbox/pod-state.js';

/**
 * What the session's status should say given its pod (undefined: not created yet / gone).
 * `expiresAt` comes from the GC math; `now` stamps condition transitions.
 */
export function computeSessionStatus(...args: Parameters<typeof unbounded>): SandboxSessionStatus {
  return boundMessages(unbounded(...args));
}

/**
 * What a Ready session's pod stopped by a SIGKILL of its interpreter (exit code 137, not the
 * kernel's OOM kill) says. A call that could not be interrupted is reported by the gateway first
 * (kernelLost); what is left is the Node kernel's watchdog ending code left running between calls
 * (runtime/node/watchdog.js), or code in the session that killed its own interpreter.
 */
export const KILLED_INTERPRETER_MESSAGE =
  "The session's interpreter was killed (SIGKILL), and its state with it: code left running between calls held a Node interpreter for longer than the longest call may run (its watchdog then stops it), or code in the session killed the interpreter. Create a new session.";

function killedInterpreter(pod: V1Pod): boolean {
  const term = pod.status?.containerStatuses?.[0]?.state?.terminated;
  return term?.exitCode === 137 && term.reason !== 'OOMKilled' && !pod.metadata?.deletionTimestamp && pod.status?.reason !== 'DeadlineExceeded';
}

function unbounded(
  session: SandboxSession,
  pod: V1Pod | undefined,
  podName: string,
  expiresAt: Date,
  startupExpired: boolean,
  now: Date,
): SandboxSessionStatus {
  const prev = session.status ?? {};
  const generation = session.metadata.generation;
  const base = { ...prev, podName, observedGeneration: generation, expiresAt: expiresAt.toISOString() };
  const cond = (status: 'True' | 'False', reason: string, message: string): SandboxSessionStatus['conditions'] =>
    setCondition(prev.conditions, { type: CONDITION_READY, status, reason, message, observedGeneration: generation }, now);

  if (prev.phase === 'Lost' || prev.phase === 'Failed') return { ...base, phase: prev.phase };
  if (prev.kernelLost) {
    const message = `The interpreter is gone (${prev.kernelLost.message}). Create a new session.`;
    return { ...base, phase: 'Lost', reason: SessionReasons.KernelLost, message, conditions: cond('False', SessionReasons.KernelLost, message) };
  }
  if (!pod) {
    if (prev.phase === 'Ready') {
      const message = "The session's pod is gone, and its state with it. Create a new session.";
      return { ...base, phase: 'Lost', reason: SessionReasons.KernelLost, message, conditions: cond('False', SessionReasons.KernelLost, message) };
    }
    return {
      ...base,
      phase: 'Pending',
      reason: SessionReasons.PodPending,
      message: "Creating the session's pod.",
      conditions: cond('False', SessionReasons.PodPending, 'Creating the pod.'),
    };
  }
  const s = podState(pod);
  if (s.kind === 'ready') {
    const message = 'The interpreter accepts calls.';
    return { ...base, phase: 'Ready', reason: SessionReasons.KernelReady, message, conditions: cond('True', SessionReasons.KernelReady, message) };
  }
  if (s.kind === 'failed') {
    const phase = prev.phase === 'Ready' ? 'Lost' : 'Failed';
    const message = phase === 'Lost' && killedInterpreter(pod) ? KILLED_INTERPRETER_MESSAGE : s.message;
    return { ...base, phase, reason: s.reason, message, conditions: cond('False', s.reason, message) };
  }
  if (prev.phase === 'Ready') {
    // A Ready session's pod never starts again (restartPolicy Never): no longer ready means its
    // interpreter stopped, and the kubelet reports the pod Failed a moment later (then Lost,
    // above). Until then it stays Ready, never back to Pending: from there that failure would read
    // as a session that failed to start (Failed, not Lost).
    return { ...base, phase: 'Ready' };
  }
  if (startupExpired) {
    const message = `The session's pod did not start in time (${s.message}). Try again later or ask the administrator to check the cluster's capacity.`;
    return { ...base, phase: 'Failed', reason: Reasons.Unschedulable, message, conditions: cond('False', Reasons.Unschedulable, message) };
  }
  return { ...base, phase: 'Pending', reason: SessionReasons.PodPending, message: s.message, conditions: cond('False', SessionReasons.PodPending, s.message) };
}

/**
 * A session refused by the controller itself — beyond the administrator's limits, its profile
 * refused, no NetworkPolicy in force, its pod's name taken: Failed with the reason, its Ready
 * condition False, and what its status said kept (its pod's name, when it expires), as in every
 * other failure. The status is applied whole (server-side apply): a field left out of it was
 * removed. Pure.
 */
export function refusedStatus(session: SandboxSession, expiresAt: Date, reason: string, message: string, now: Date): SandboxSessionStatus {
  const generation = session.metadata.generation;
  const base = { ...(session.status ?? {}), observedGeneration: generation, expiresAt: expiresAt.toISOString() };
  return failedStatus(base, reason, message, generation, now);
}

/**
 * A session that never becomes Ready — its spec.packages could not be installed (the installer's
 * sentence says which package and why), or its owner was at the session limit: Failed, with the
 * reason. Pure, like computeSessionStatus.
 */
export function failedStatus(next: SandboxSessionStatus, reason: string, message: string, generation: number | undefined, now: Date): SandboxSessionStatus {
  return boundMessages(notReady(next, 'Failed', reason, message, generation, now));
}

/** `next` in `phase` for `reason`, its Ready condition False with the same reason and message. */
function notReady(
  next: SandboxSessionStatus,
  phase: 'Failed' | 'Pending',
  reason: string,
  message: string,
  generation: number | undefined,
  now: Date,
): SandboxSessionStatus {
  return {
    ...next,
    phase,
    reason,
    message,
    conditions: setCondition(
      next.conditions,
      { type: CONDITION_READY, status: 'False', reason, message, ...(generation !== undefined && { observedGeneration: generation }) },
      now,
    ),
  };
}

/** A session whose interpreter is up while its spec.packages are being installed: still Pending. Pure. */
export function installingStatus(next: SandboxSessionStatus, generation: number | undefined, now: Date): SandboxSessionStatus {
  return notReady(next, 'Pending', SessionReasons.PackagesInstalling, "Installing the session's packages (spec.packages).", generation, now);
}

/** Status fields the gateway writes (field manager GATEWAY_FIELD_MANAGER); the controller never does. */
export const GATEWAY_OWNED_FIELDS = ['lastActivityTime', 'runCount', 'kernelLost'] as const;

/**
 * The part of a status the controller applies: every field but the gateway's. Applying the
 * gateway's fields too (from a possibly stale cache) would take them over and could undo a newer
 * runCount or lastActivityTime.
 */
export function controllerOwned(s: SandboxSessionStatus): SandboxSessionStatus {
  const out: SandboxSessionStatus = { ...s };
  for (const k of GATEWAY_OWNED_FIELDS) delete out[k];
  return out;
}

/** True when applying `next` would change what the controller owns (so no write happens otherwise). */
export function sessionStatusChanged(prev: SandboxSessionStatus | undefined, next: SandboxSessionStatus): boolean {
  return JSON.stringify(normalize(controllerOwned(prev ?? {}))) !== JSON.stringify(normalize(controllerOwned(next)));
}

function normalize(s: SandboxSessionStatus): unknown {
  const keys = Object.keys(s).sort() as Array<keyof SandboxSessionStatus>;
  return keys.map((k) => [k, s[k]]);
}
