// What a call about a session could not do, and what its user should do instead.
import { asReason, sentence, type Reason, type SandboxSessionStatus } from '../api/v1alpha1/index.js';
import { PackageError } from '../packages/policy.js';
import type { GaveUp } from './turns.js';

/**
 * Refused or impossible request about a session, with what to do instead. `mayHaveRun`: the
 * call's code reached the interpreter before the failure (its stream broke, the interpreter died),
 * so whether it ran is unknown; otherwise it did not run. `reason`: the session's own, when it
 * failed to start (Unschedulable, ImageNotFound, ...), for the record of a call it refused.
 */
export class SessionError extends Error {
  readonly mayHaveRun: boolean;
  readonly reason: Reason | undefined;

  constructor(
    message: string,
    readonly hint: string,
    details: { mayHaveRun?: boolean; reason?: Reason | undefined } = {},
  ) {
    super(message);
    this.name = 'SessionError';
    this.mayHaveRun = details.mayHaveRun ?? false;
    this.reason = details.reason;
  }
}

/** A package refusal as a session error (its message and hint); anything else as it is. */
export function asSessionError(err: unknown): unknown {
  return err instanceof PackageError ? new SessionError(err.message, err.hint) : err;
}

/**
 * A session that is over (Lost, or Failed to start): why, as its status says, and for a session
 * that failed to start its reason (an interpreter lost is KernelLost, not passed on). The status
 * message is one sentence already; it is not given a second full stop.
 */
export function goneError(name: string, status: SandboxSessionStatus | undefined): SessionError {
  const phase = status?.phase;
  const lost = status?.kernelLost;
  const why = lost && phase !== 'Lost' ? `the interpreter is gone (${lost.message})` : (status?.message ?? 'its interpreter is gone');
  const reason = phase === 'Failed' && !lost ? asReason(status?.reason) : undefined;
  return new SessionError(sentence(`Session ${name} is ${phase === 'Failed' ? 'failed' : 'lost'}: ${why}`), 'Create a new session with create_session.', {
    reason,
  });
}

/** The session was still starting for as long as this call could wait: it did not run. */
export class SessionNotReadyError extends SessionError {
  constructor(message: string, hint: string) {
    super(message, hint);
    this.name = 'SessionNotReadyError';
  }
}

/** The session was busy with another call for as long as this call could wait: it did not run. */
export class SessionBusyError extends SessionError {
  constructor(message: string, hint: string) {
    super(message, hint);
    this.name = 'SessionBusyError';
  }
}

/** Calls that may wait for one busy session on one replica (each holds its code: ≤ 256 KiB). */
export const WAITING_CALLS_PER_SESSION = 16;

/**
 * Why a call that waited for a busy session did not run, and what to do. `silent`: the last busy
 * answer was a Node kernel that did not answer at all (it reads its socket only between stretches
 * of synchronous code): then no call need be running — code an earlier call left behind (a timer,
 * a callback) can hold the interpreter, until the kernel's watchdog stops it (and the session with
 * it) past the longest call's timeout (runtime/node/watchdog.js).
 */
export function busyError(session: string, why: GaveUp, waitedSeconds: number, silent = false): SessionBusyError {
  const hint = 'Call again once the running call has finished (its timeout_seconds bounds it), or run this code in another session.';
  switch (why) {
    case 'deadline':
      if (silent)
        return new SessionBusyError(
          `Session ${session} did not answer for all of the ${waitedSeconds} s this call could wait: its interpreter is running synchronous JavaScript, another call's or code an earlier call left running (a timer, a callback, a promise); this call did not run.`,
          'Call again later. Code left running between calls may hold the interpreter for as long as the longest call so far could run (its timeout_seconds and a 2-second grace); then the interpreter is stopped, and the session is lost with its state. Close the session (close_session) and create a new one if you cannot wait.',
        );
      return new SessionBusyError(
        `Session ${session} was running another call for all of the ${waitedSeconds} s this call could wait; this call did not run.`,
        hint,
      );
    case 'full':
      return new SessionBusyError(
        `Session ${session} is running another call and ${WAITING_CALLS_PER_SESSION} more are waiting for it; this call did not run.`,
        hint,
      );
    case 'aborted':
      return new SessionBusyError(
        `The call was cancelled while it waited for session ${session} to finish another call; it did not run.`,
        'Call again if you still need it.',
      );
  }
}
