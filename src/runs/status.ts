// Pure status computation for SandboxRuns: what the world looks like → what .status should say.
// No I/O and time is a parameter, so every branch is a table test.
import { constants } from 'node:os';
import {
  CONDITION_READY,
  Reasons,
  boundMessages,
  finishedConditions,
  setCondition,
  type Reason,
  type RunPhase,
  type SandboxRun,
  type SandboxRunStatus,
  type WorkspaceMedium,
} from '../api/v1alpha1/index.js';
import { diskFull, evicted, leftoverNote, processLimit, type FullVolume } from './bounds.js';
import { outOfMemory, type PodFailure } from '../sandbox/pod-failure.js';
import { TMP_DIR, WORKSPACE_DIR } from '../sandbox/pod.js';
import { withoutControls } from '../util/text.js';

export interface Limits {
  maxTimeoutSeconds: number;
  memoryLimit: string;
  maxMemory: string;
  /** The sandbox's process cap (the kubelet's podPidsLimit), when the operator knows it. */
  maxProcesses?: number;
  workspaceSizeLimit: string;
  /** Memory: /workspace's files count against the memory limit (as /tmp's always do). */
  workspaceMedium?: WorkspaceMedium;
  tmpSizeLimit: string;
}

/** `ready`: the Ready condition's message (a run in a session has no pod of its own to be ready). */
export function runningStatus(run: SandboxRun, podName: string, startTime: Date, now: Date, ready = 'Sandbox pod is ready.'): SandboxRunStatus {
  const generation = run.metadata.generation;
  return {
    ...run.status,
    phase: 'Running',
    podName,
    startTime: startTime.toISOString(),
    observedGeneration: generation,
    reason: Reasons.PodRunning,
    message: 'The code is executing.',
    conditions: setCondition(
      run.status?.conditions,
      { type: CONDITION_READY, status: 'True', reason: Reasons.PodRunning, message: ready, observedGeneration: generation },
      now,
    ),
  };
}

/** What the executor observed, reduced to facts (see classifyExecution). */
export interface ExecutionFacts {
  /** Exit code reported by the runner (or by the exec status when the runner could not report). */
  exitCode?: number;
  /** The runner saw its deadline expire. */
  timedOut: boolean;
  /** The kernel OOM-killed a process of the run. */
  oomKilled: boolean;
  /** The runner's trailer was found (the runner ran to its end). */
  runnerReported: boolean;
  /** The exec transport failed or the watchdog fired (no result from the pod). */
  execError?: string;
  /**
   * The code may have reached the sandbox (the stream had opened): a transport failure after that
   * cannot tell whether the code ran. False only when it provably did not start.
   */
  codeSent?: boolean;
  watchdogFired: boolean;
  /** The pod was gone or terminating when the exec ended. */
  podGone: boolean;
  /** A fork failed during the run because the sandbox's process cap was reached. */
  processLimit?: boolean;
  /** A volume was full when the program ended (or its watcher stopped the program). */
  diskFull?: FullVolume;
  /** The pod's container was OOM-killed or the pod was evicted (read from the pod's status). */
  podFailure?: PodFailure;
  /** How many of the program's processes were still running when it ended (they were killed). */
  leftovers?: number;
  /** Bytes the program wrote to stderr (the runner's trailer not counted), when known. */
  stderrBytes?: number;
}

export interface Classification {
  phase: Extract<RunPhase, 'Succeeded' | 'Failed' | 'TimedOut'>;
  reason: Reason;
  message: string;
  exitCode?: number;
  /**
   * The outcome Event's note where `message` quotes the sandbox (a kernel's error text, a
   * program's exception): Events are read by whoever may list them in the namespace, so the note
   * points at the status, which only the run's readers see. Absent: the note is the message.
   */
  note?: string;
}

/** Event notes that point at the status instead of quoting the sandbox (Classification.note). */
export const EVENT_NOTES = {
  execFailed: 'The code could not be run, or the connection to the sandbox broke while it ran; status.message says which and whether it may have run.',
  exception: 'The code raised an exception; status.message and status.stderr say which.',
  sessionCall: 'The call in the session could not be made or completed; status.message says why.',
} as const;

const SIGNAL_NAMES = new Map(Object.entries(constants.signals).map(([name, n]) => [n, name]));

/**
 * What a non-zero exit says: where to look (stderr, when the program wrote any), and what a code
 * of 128 + n means when n is a signal (a shell's code for a process that signal ended).
 */
export function nonZeroExit(what: 'program' | 'command', exitCode: number | undefined, stderrBytes: number | undefined): string {
  const n = exitCode !== undefined && exitCode > 128 ? exitCode - 128 : undefined;
  const signal = n === undefined ? undefined : SIGNAL_NAMES.get(n);
  const meaning = signal ? ` (128 + ${String(n)}: a shell's code for a process ended by ${signal})` : '';
  const where = stderrBytes === 0 ? ' and wrote nothing to stderr.' : '; see stderr.';
  return `The ${what} exited with code ${String(exitCode)}${meaning}${where}`;
}

export function classifyExecution(f: ExecutionFacts, timeoutSeconds: number, limits: Limits): Classification {
  const timedOut: Classification = {
    phase: 'TimedOut',
    reason: Reasons.TimedOut,
    message: `The code ran longer than timeoutSeconds=${timeoutSeconds} and was stopped. Make it faster or raise timeoutSeconds (maximum ${limits.maxTimeoutSeconds}).`,
  };
  const oom = (exitCode: number | undefined): Classification => ({
    phase: 'Failed',
    reason: Reasons.OOMKilled,
    exitCode,
    message: `The program ${outOfMemory({ limit: limits.memoryLimit, tmpfs: limits.workspaceMedium === 'Memory' ? [TMP_DIR, WORKSPACE_DIR] : [TMP_DIR] })}. Use less memory (or delete files) or request more with resources.memory (maximum ${limits.maxMemory}).`,
  });
  if (f.runnerReported) {
    // A bound the program ran into explains a failure (or a timeout: a fork bomb runs until it
    // is stopped) better than the exit code or the deadline. The process cap always does: the
    // classic bash fork bomb exits 0 at once and leaves its children to meet the cap (they are
    // killed when the program ends). A full disk only explains a failure: a program may fill
    // /tmp on purpose and still succeed.
    const failed = f.timedOut || f.exitCode !== 0;
    if (f.processLimit) return { ...processLimit(limits, f.timedOut ? `It was stopped at timeoutSeconds=${timeoutSeconds}.` : ''), exitCode: f.exitCode };
    // An OOM kill is what ended a program that did not run into its deadline, even when a
    // volume is also full (the OOM killer, not the disk, sent the SIGKILL).
    if (f.oomKilled && !f.timedOut && f.exitCode !== 0) return oom(f.exitCode);
    if (f.diskFull && failed) return { ...diskFull(f.diskFull, limits), exitCode: f.exitCode };
    if (f.timedOut) return { ...timedOut, exitCode: f.exitCode };
    if (f.exitCode === 0)
      return { phase: 'Succeeded', reason: Reasons.Succeeded, exitCode: 0, message: `The program exited with code 0.${leftoverNote(f.leftovers)}` };
    return {
      phase: 'Failed',
      reason: Reasons.NonZeroExit,
      exitCode: f.exitCode,
      message: nonZeroExit('program', f.exitCode, f.stderrBytes),
    };
  }
  // No report from the pod: what the pod's status says about why its container stopped comes
  // first (an OOM kill or an eviction ends the exec stream like a lost connection would).
  if (f.podFailure?.reason === Reasons.OOMKilled) return oom(f.exitCode);
  if (f.podFailure?.reason === Reasons.Evicted) return evicted(f.podFailure.detail, limits);
  if (f.watchdogFired) return timedOut;
  if (f.podGone) {
    return { phase: 'Failed', reason: Reasons.PodDeleted, message: 'The sandbox pod was deleted while the code ran. Run it again.' };
  }
  if (f.execError !== undefined && f.codeSent === false) {
    return {
      phase: 'Failed',
      reason: Reasons.ExecFailed,
      message: `The code could not be run in the sandbox: ${withoutControls(f.execError)}. It did not start; run it again. If this repeats, tell the administrator.`,
      note: EVENT_NOTES.execFailed,
    };
  }
  if (f.execError !== undefined) {
    return {
      phase: 'Failed',
      reason: Reasons.ExecFailed,
      message: `The connection to the sandbox broke after the code was sent (${withoutControls(f.execError)}): it may have run in part or in full, and its outcome is unknown. Run it again only if repeating it is safe; if this repeats, tell the administrator.`,
      note: EVENT_NOTES.execFailed,
    };
  }
  // The runner died without its trailer (e.g. killed together with everything else).
  return {
    phase: 'Failed',
    reason: f.exitCode === 137 ? Reasons.OOMKilled : Reasons.ExecFailed,
    exitCode: f.exitCode,
    message:
      f.exitCode === 137
        ? `The sandbox was killed (SIGKILL), most likely for exceeding its memory limit (${limits.memoryLimit}).`
        : `The sandbox runner stopped unexpectedly (exit code ${String(f.exitCode)}). Run it again; if this repeats, tell the administrator.`,
  };
}

export interface CapturedOutput {
  stdout: string;
  stderr: string;
  stdoutBytes: number;
  stderrBytes: number;
  truncated: boolean;
}

export function completedStatus(run: SandboxRun, c: Classification, out: CapturedOutput | undefined, times: { start?: Date; end: Date }): SandboxRunStatus {
  const generation = run.metadata.generation;
  const startTime = run.status?.startTime ?? times.start?.toISOString();
  const durationMs = startTime ? Math.max(0, times.end.getTime() - Date.parse(startTime)) : undefined;
  const conditions = finishedConditions(run.status?.conditions, { reason: c.reason, message: c.message, generation }, times.end);
  const status: SandboxRunStatus = {
    ...run.status,
    phase: c.phase,
    reason: c.reason,
    message: c.message,
    observedGeneration: generation,
    conditions,
    completionTime: times.end.toISOString(),
  };
  if (startTime) status.startTime = startTime;
  if (durationMs !== undefined) status.durationMs = durationMs;
  if (c.exitCode !== undefined) status.exitCode = c.exitCode;
  if (out) Object.assign(status, out);
  return status;
}

/**
 * The status of a stored run the schema refuses (written before a validation existed): Failed
 * InvalidSpec with `message`, finished as any run is (its Complete condition), built from nothing
 * of the object (which cannot be read as a SandboxRun).
 */
export function invalidRunStatus(message: string, now: Date): SandboxRunStatus {
  return boundMessages({
    phase: 'Failed',
    reason: Reasons.InvalidSpec,
    message,
    completionTime: now.toISOString(),
    conditions: finishedConditions(undefined, { reason: Reasons.InvalidSpec, message }, now),
  });
}

/** A run that failed before its code could start (invalid spec, image, scheduling, pod failure). */
export function failedStatus(run: SandboxRun, reason: Reason, message: string, now: Date): SandboxRunStatus {
  return completedStatus(run, { phase: 'Failed', reason, message }, undefined, { end: now });
}
