// A session call's kernel result as a RunOutcome (the shape execute_code and SandboxRun status use).
import { Reasons } from '../api/v1alpha1/index.js';
import { capText } from '../exec/frames.js';
import type { RunOutcome } from '../runs/types.js';
import type { SessionCallResult } from './service.js';

/** An exception's summary in the outcome's message; its full text is in stderr. */
const MESSAGE_MAX_CHARS = 1000;

export function sessionOutcome(r: SessionCallResult, namespace: string, timeoutSeconds: number): RunOutcome {
  // The traceback joins stderr: together they are cut to the cap again, as every stored text is.
  const stderr = capText(r.error && !r.stderr.includes(r.error.traceback) ? `${r.stderr}${r.error.traceback}` : r.stderr, r.capChars);
  const base = {
    runName: '',
    session: r.session,
    namespace,
    stdout: r.stdout,
    stderr: stderr.text,
    stdoutBytes: r.stdoutBytes,
    stderrBytes: r.stderrBytes,
    truncated: r.truncated || stderr.cut,
    durationMs: r.durationMs,
    ...(r.result !== undefined && { result: r.result }),
    ...(r.exitCode !== undefined && { exitCode: r.exitCode }),
  };
  switch (r.status) {
    case 'ok':
      return r.exitCode !== undefined && r.exitCode !== 0
        ? { ...base, phase: 'Failed', reason: Reasons.NonZeroExit, message: `The command exited with code ${r.exitCode}.` }
        : { ...base, phase: 'Succeeded' };
    case 'error':
      // The message is a summary (it lands in status conditions); the full text is in stderr.
      return { ...base, phase: 'Failed', reason: Reasons.Exception, message: capText(`${r.error?.ename ?? 'Error'}: ${r.error?.evalue ?? ''}`.trim(), MESSAGE_MAX_CHARS).text };
    case 'timeout':
      return { ...base, phase: 'TimedOut', reason: Reasons.TimedOut, message: `The call ran longer than timeout_seconds=${timeoutSeconds} and was interrupted; the session keeps its state.` };
    default:
      return { ...base, phase: 'Failed', reason: Reasons.KernelLost, message: 'The call could not be interrupted at its timeout, so the session was stopped and its state is lost. Create a new session.' };
  }
}
