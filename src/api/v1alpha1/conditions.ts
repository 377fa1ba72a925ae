// Condition types and reasons of SandboxRuns and SandboxSessions. Reasons are part of the API: clients, alerts and
// the MCP gateway match on them, so each value is a stable CamelCase constant declared here and
// never built from free text.
import { z } from 'zod';
import { cutUnits, hasControls, withoutControls } from '../../util/text.js';

/** True while the sandbox pod exists and is Ready to accept the code (exec). */
export const CONDITION_READY = 'Ready';
/** True once the run reached a terminal phase (Succeeded, Failed or TimedOut). */
export const CONDITION_COMPLETE = 'Complete';

export const Reasons = {
  /** The sandbox pod was created; it is not scheduled or started yet. */
  PodCreated: 'PodCreated',
  /** The pod exists but is not Ready (scheduling, pulling the image, starting). */
  PodPending: 'PodPending',
  /** The pod is Ready and the code is executing in it. */
  PodRunning: 'PodRunning',
  /** The program exited with code 0. */
  Succeeded: 'Succeeded',
  /** The program exited with a non-zero code; see status.exitCode and status.stderr. */
  NonZeroExit: 'NonZeroExit',
  /** The run exceeded spec.timeoutSeconds (phase TimedOut); same word Jobs use for this. */
  TimedOut: 'DeadlineExceeded',
  /** The container was killed for exceeding its memory limit. */
  OOMKilled: 'OOMKilled',
  /** The pod failed for a reason outside the program (eviction, node loss, ...). */
  PodFailed: 'PodFailed',
  /** The sandbox image could not be pulled (missing, wrong name, no access). */
  ImageNotFound: 'ImageNotFound',
  /** No node could run the pod within the startup timeout (resources, taints, quota). */
  Unschedulable: 'Unschedulable',
  /** The spec is invalid or exceeds the administrator's limits; nothing was started. */
  InvalidSpec: 'InvalidSpec',
  /** The code could not be run through the exec API (connection or protocol failure). */
  ExecFailed: 'ExecFailed',
  /** The sandbox pod disappeared before the run finished. */
  PodDeleted: 'PodDeleted',
  /** Code in a session raised an exception; the traceback is in stderr (the session lives on). */
  Exception: 'Exception',
  /** The session's interpreter is gone (crashed, stuck past its timeout, or its pod deleted). */
  KernelLost: 'KernelLost',
  /**
   * Nothing was started: the operator's sandbox self-check found a protection the cluster does
   * not enforce (and the administrator did not accept running without it); the message says which.
   */
  SandboxNotEnforced: 'SandboxNotEnforced',
  /** Pending: the run waits for a free run slot (CODEMODE_MAX_CONCURRENT_RUNS / _NAMESPACE_RUNS). */
  Queued: 'Queued',
  /** The namespace's ResourceQuota refused the sandbox pod; nothing ran. */
  QuotaExceeded: 'QuotaExceeded',
  /** The program tried to start more processes (or threads) than the sandbox's process cap allows. */
  ProcessLimit: 'ProcessLimit',
  /** /workspace or /tmp reached its size limit while the program wrote to it. */
  DiskFull: 'DiskFull',
  /** The kubelet evicted the sandbox pod (e.g. its disk use exceeded a limit); everything in it is gone. */
  Evicted: 'Evicted',
  /** The run's session was running other calls for as long as the run could wait; its code did not run. */
  SessionBusy: 'SessionBusy',
  /** The run's session was still starting for as long as the run could wait; its code did not run. */
  SessionNotReady: 'SessionNotReady',
  /**
   * A session's status named a pod the session does not own (only the gateway writes a session's
   * status), or the name of its pod is taken by another's: nothing runs in that pod, it is left alone.
   */
  ForeignPod: 'ForeignPod',
} as const;

export type Reason = (typeof Reasons)[keyof typeof Reasons];

const REASON_VALUES: ReadonlySet<string> = new Set(Object.values(Reasons));

/** `value` if it is a run Reason (e.g. a session's reason that a run can record too), else undefined. */
export function asReason(value: string | undefined): Reason | undefined {
  return value !== undefined && REASON_VALUES.has(value) ? (value as Reason) : undefined;
}

export const ConditionStatusSchema = z.enum(['True', 'False', 'Unknown']);
export type ConditionStatus = z.infer<typeof ConditionStatusSchema>;

// Same shape and bounds as metav1.Condition so generic tooling (kubectl wait, kstatus) reads it.
/** Longest condition message (and status.message of the kinds that carry conditions). */
export const MAX_CONDITION_MESSAGE = 32768;

export const ConditionSchema = z.object({
  type: z
    .string()
    .max(316)
    .regex(/^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$/, {
      error: 'must be a CamelCase condition type, optionally prefixed with a DNS domain and /',
    })
    .describe('Type of the condition in CamelCase, e.g. Ready or Complete.'),
  status: ConditionStatusSchema.describe('Status of the condition: True, False or Unknown.'),
  reason: z
    .string()
    .min(1)
    .max(1024)
    .regex(/^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/, {
      error: 'must be CamelCase: a letter, then letters, digits, _ , or :',
    })
    .describe('Machine-readable CamelCase reason for the last transition (see the Reasons list).'),
  message: z.string().max(MAX_CONDITION_MESSAGE).describe('Human-readable details about the last transition; may be empty.'),
  lastTransitionTime: z.iso.datetime({ offset: true }).describe('When the condition last changed status (RFC 3339).'),
  observedGeneration: z.int().min(0).optional().describe('The metadata.generation the condition was computed from.'),
});
export type Condition = z.infer<typeof ConditionSchema>;

/** Reasons of a SandboxSession's phase and Events (run reasons such as Unschedulable apply too). */
export const SessionReasons = {
  /** The interpreter accepts calls. */
  KernelReady: 'KernelReady',
  /** The session's pod is starting. */
  PodPending: Reasons.PodPending,
  /** The interpreter or its pod is gone; state is lost. */
  KernelLost: 'KernelLost',
  /** Deleted after idleTimeoutSeconds without a call. */
  IdleTimeout: 'IdleTimeout',
  /** Deleted after maxLifetimeSeconds. */
  LifetimeExceeded: 'LifetimeExceeded',
  /** The interpreter is up and spec.packages are being installed (phase Pending). */
  PackagesInstalling: 'PackagesInstalling',
  /** spec.packages are in the session (an Event: the message lists what was installed). */
  PackagesInstalled: 'PackagesInstalled',
  /** A package of spec.packages may not be installed (the profile's policy, a size limit); the message says which and why. */
  PackagesRefused: 'PackagesRefused',
  /** spec.packages could not be installed (not found, no wheel for the sandbox, the index unreachable); the message says which and why. */
  PackagesFailed: 'PackagesFailed',
  /** Its owner already had CODEMODE_USER_MAX_SESSIONS sessions when it was to start (one applied with kubectl, say): it never starts. */
  UserSessionLimit: 'UserSessionLimit',
} as const;

/** Reasons of Events that are not transitions of a phase. */
export const EventReasons = {
  /** Sandbox code asked for a nested tool call the gateway refused (code mode); the message says which and why. */
  ToolCallDenied: 'ToolCallDenied',
} as const;

/** Sets (or replaces) a condition; keeps lastTransitionTime when the status did not change. */
export function setCondition(conditions: readonly Condition[] | undefined, next: Omit<Condition, 'lastTransitionTime'>, now: Date): Condition[] {
  const list = [...(conditions ?? [])];
  const i = list.findIndex((c) => c.type === next.type);
  const prev = i >= 0 ? list[i] : undefined;
  const lastTransitionTime = prev && prev.status === next.status ? prev.lastTransitionTime : now.toISOString();
  const cond: Condition = { ...next, lastTransitionTime };
  if (i >= 0) list[i] = cond;
  else list.push(cond);
  return list;
}

/**
 * `text` as one sentence: a full stop added unless it ends one already (".", "!", "?"), so a
 * message that quotes another (an API error, a pod's status) does not read "..".
 */
export function sentence(text: string): string {
  return /[.!?]$/.test(text) ? text : `${text}.`;
}

/** What a finished run's Ready condition says (its pod is no longer in use). */
export const RUN_FINISHED_READY_MESSAGE = 'The run is finished; its sandbox pod is released.';

/**
 * The conditions of a finished run: Complete True with the outcome's reason and message, Ready
 * False. Every terminal status carries them, however it was written (the executor's, a refusal of
 * an object the schema rejects, one cut to its minimum to fit), so `kubectl wait
 * --for=condition=Complete` ends for every run.
 */
export function finishedConditions(
  conditions: readonly Condition[] | undefined,
  outcome: { reason: string; message: string; generation?: number | undefined },
  now: Date,
): Condition[] {
  const generation = outcome.generation !== undefined ? { observedGeneration: outcome.generation } : {};
  const complete = setCondition(conditions, { type: CONDITION_COMPLETE, status: 'True', reason: outcome.reason, message: outcome.message, ...generation }, now);
  return setCondition(complete, { type: CONDITION_READY, status: 'False', reason: outcome.reason, message: RUN_FINISHED_READY_MESSAGE, ...generation }, now);
}

/**
 * A status with its message and its conditions' messages within MAX_CONDITION_MESSAGE and without
 * control characters (unchanged, the same object, when they are so). They quote the kubelet, the
 * scheduler, an installer or the sandbox (an exception's text, a kernel's error), none bounded at
 * the source for this: one message over the bound would have the whole status refused, and a
 * line break or an escape sequence from the sandbox would draw lines of its own (a forged
 * "Reason: Succeeded") in what `kubectl describe` shows.
 */
export function boundMessages<S extends { message?: string; conditions?: Condition[] }>(s: S): S {
  const bad = (m: string | undefined): boolean => m !== undefined && (m.length > MAX_CONDITION_MESSAGE || hasControls(m));
  if (!bad(s.message) && !(s.conditions ?? []).some((c) => bad(c.message))) return s;
  const cut = (m: string): string => cutUnits(withoutControls(m), MAX_CONDITION_MESSAGE);
  return {
    ...s,
    ...(s.message !== undefined && { message: cut(s.message) }),
    ...(s.conditions && { conditions: s.conditions.map((c) => ({ ...c, message: cut(c.message) })) }),
  };
}
