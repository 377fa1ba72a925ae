// A session call's kernel result as a RunOutcome (the shape execute_code and SandboxRun status use).
import { Reasons } from '../api/v1alpha1/index.js';
import { capText } from '../exec/frames.js';
import { outOfMemory, workspaceOverText } from '../sandbox/pod-failure.js';
import { diskFull, processLimit } from './bounds.js';
import { nonZeroExit } from './status.js';
import type { RunOutcome } from './types.js';
import type { SessionCallResult } from '../sessions/service.js';

/** An exception's summary in the outcome's message; its full text is in stderr. */
const MESSAGE_MAX_CHARS = 1000;

export function sessionOutcome(r: SessionCallResult, namespace: string, timeoutSeconds: number): RunOutcome {
  // The traceback joins stderr: together they are cut to the cap again, as every stored text is,
  // and counted in stderrBytes (the size of the whole stderr, never less than the text kept).
  // A kernel may have printed the traceback as the end of stderr already. Looked for at the end
  // only: a search anywhere in stderr (includes) costs stderr × traceback for a forged traceback
  // whose long tail repeats in stderr — seconds of the event loop at the output cap.
  const traceback = r.error && !r.stderr.trimEnd().endsWith(r.error.traceback.trimEnd()) ? r.error.traceback : '';
  const stderr = capText(`${r.stderr}${traceback}`, r.capChars);
  const base = {
    runName: '',
    session: r.session,
    namespace,
    stdout: r.stdout,
    stderr: stderr.text,
    stdoutBytes: r.stdoutBytes,
    // The kernel's count is its word (up to 2^53 - 1): the sum stays an exact integer, or the
    // records that keep it (a session call's audit record, a SandboxRun's status) would not match
    // their own schema (z.int()).
    stderrBytes: Math.min(Number.MAX_SAFE_INTEGER, r.stderrBytes + Buffer.byteLength(traceback)),
    truncated: r.truncated || stderr.cut,
    durationMs: r.durationMs,
    ...(r.result !== undefined && { result: r.result }),
    ...(r.exitCode !== undefined && { exitCode: r.exitCode }),
    ...(r.display !== undefined && { display: r.display }),
  };
  const bound = boundOutcome(r);
  if (bound) return { ...base, ...bound };
  switch (r.status) {
    case 'ok':
      return r.exitCode !== undefined && r.exitCode !== 0
        ? { ...base, phase: 'Failed', reason: Reasons.NonZeroExit, message: nonZeroExit('command', r.exitCode, base.stderrBytes) }
        : { ...base, phase: 'Succeeded' };
    case 'error':
      // The message is a summary (it lands in status conditions); the full text is in stderr.
      return {
        ...base,
        phase: 'Failed',
        reason: Reasons.Exception,
        message: capText(`${r.error?.ename ?? 'Error'}: ${r.error?.evalue ?? ''}`.trim(), MESSAGE_MAX_CHARS).text,
      };
    case 'timeout':
      return {
        ...base,
        phase: 'TimedOut',
        reason: Reasons.TimedOut,
        message: `The call ran longer than timeout_seconds=${timeoutSeconds} and was interrupted; the session keeps its state.`,
      };
    default:
      return {
        ...base,
        phase: 'Failed',
        reason: Reasons.KernelLost,
        message: 'The call could not be interrupted at its timeout, so the session was stopped and its state is lost. Create a new session.',
      };
  }
}

/**
 * A bound the call met, when it explains the outcome: the interpreter OOM-killed or its pod
 * evicted (the session is lost), a fork refused at the process cap (always: see
 * classifyExecution), or a failed call during which a subprocess was OOM-killed or a volume was
 * full.
 */
function boundOutcome(r: SessionCallResult): Pick<RunOutcome, 'phase' | 'reason' | 'message' | 'memoryLimit'> | undefined {
  const lost = 'The session is lost with its state: create a new session.';
  if (r.status === 'lost' && r.podFailure === Reasons.OOMKilled) {
    return {
      phase: 'Failed',
      reason: Reasons.OOMKilled,
      message: `The session's interpreter ${outOfMemory(r.memory)}. ${lost} Use less memory (or delete files): process data in smaller pieces.`,
      ...(r.memory?.limit !== undefined && { memoryLimit: r.memory.limit }),
    };
  }
  // Ended by its kernel for /workspace (read from the pod's exit status, or a Node kernel's own
  // `lost` result when code held its thread): the session's word about itself, as diskFull always is.
  if (r.status === 'lost' && (r.podFailure === Reasons.DiskFull || r.diskFull === 'workspace')) {
    const what = r.podFailure === Reasons.DiskFull ? (r.error?.evalue ?? '') : workspaceOverText(undefined);
    return {
      phase: 'Failed',
      reason: Reasons.DiskFull,
      message: `The session's ${capText(what.replace(/\.$/, ''), 300).text}: on the node's disk they take room every pod there shares. ${lost} Write less data, or fewer and larger files, to /workspace.`,
    };
  }
  if (r.status === 'lost' && r.podFailure === Reasons.Evicted) {
    return {
      phase: 'Failed',
      reason: Reasons.Evicted,
      message: `The session's pod was evicted by the kubelet (${capText(r.error?.evalue ?? '', 300).text}). ${lost} Write less data to /workspace.`,
    };
  }
  if (r.processLimit === true) {
    const c = processLimit({}, r.status === 'timeout' ? 'The call was stopped at its timeout; the session keeps its state.' : '');
    return { phase: 'Failed', reason: c.reason, message: c.message };
  }
  const failed = r.status === 'error' || r.status === 'timeout' || (r.exitCode !== undefined && r.exitCode !== 0);
  if (!failed) return undefined;
  if (r.diskFull === 'workspace' || r.diskFull === 'tmp') {
    const c = diskFull(r.diskFull, {});
    return { phase: 'Failed', reason: c.reason, message: c.message };
  }
  if (r.oomKilled === true) {
    return {
      phase: 'Failed',
      reason: Reasons.OOMKilled,
      message: 'A process of the call used more memory than the sandbox allows and was killed. Use less memory: process data in smaller pieces.',
    };
  }
  return undefined;
}
