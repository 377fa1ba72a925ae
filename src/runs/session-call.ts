// The one path of a call in a session, shared by the gateway's execute_code (session argument) and
// by a SandboxRun with spec.session: find the caller's session, check the language with one rule,
// run the code in the session's interpreter, and shape the result as a RunOutcome.
import {
  Reasons,
  kernelLanguage,
  normalizeLanguage,
  type KernelLanguage,
  type Reason,
  type Language,
  type Owner,
  type SessionLanguage,
} from '../api/v1alpha1/index.js';
import { SessionBusyError, SessionError, SessionNotReadyError } from '../sessions/errors.js';
import type { SessionCall, SessionService } from '../sessions/service.js';
import { sessionOutcome } from './session-outcome.js';
import type { OutputChunk, RunOutcome } from './types.js';

/** A call in a session: what the interpreter gets (SessionCall), and who asks, in which language. */
export interface SessionCallRequest extends SessionCall {
  session: string;
  /** The language the caller asked for; undefined means "the session's". */
  language?: Language;
  /**
   * Where that language was written, when the caller cannot leave it out: a SandboxRun's
   * spec.language (the CRD fills in python). A wrong language's hint then names the field.
   */
  languageField?: string;
  owner?: Owner;
}

/**
 * A call's request out of what an execute_code call or a SandboxRun's spec says (the same field
 * names), with what only the caller knows (`extra`: nested calls, signal, wait).
 */
export function sessionCallRequest(
  session: string,
  src: { code: string; timeoutSeconds: number; language?: Language | undefined; stdin?: string | undefined; owner?: Owner | undefined },
  extra: Pick<SessionCall, 'onCall' | 'signal' | 'onWait' | 'waitUntil' | 'key'> = {},
): SessionCallRequest {
  return {
    session,
    code: src.code,
    timeoutSeconds: src.timeoutSeconds,
    ...(src.language !== undefined && { language: src.language }),
    ...(src.stdin !== undefined && { stdin: src.stdin }),
    ...(src.owner && { owner: src.owner }),
    ...(extra.onCall && { onCall: extra.onCall }),
    ...(extra.signal && { signal: extra.signal }),
    ...(extra.onWait && { onWait: extra.onWait }),
    ...(extra.waitUntil !== undefined && { waitUntil: extra.waitUntil }),
    ...(extra.key !== undefined && { key: extra.key }),
  };
}

/**
 * Why a call has no outcome: refused before the code reached the interpreter, the session busy
 * with another call or still starting for as long as this one could wait (it did not start), or
 * failed there. `mayHaveRun`: the failure came after the code reached the interpreter. `reason`:
 * the session's own, when it failed to start (a SandboxRun records it instead of the stage's).
 */
export interface SessionCallProblem {
  stage: 'refused' | 'busy' | 'starting' | 'failed';
  message: string;
  hint: string;
  mayHaveRun?: true;
  reason?: Reason;
}

/** The reason a SandboxRun in a session records when its call has no outcome. */
export const problemReason = {
  refused: Reasons.InvalidSpec,
  busy: Reasons.SessionBusy,
  starting: Reasons.SessionNotReady,
  failed: Reasons.KernelLost,
} as const satisfies Record<SessionCallProblem['stage'], Reason>;

/** What a session error means for the call: whether it may have run, and the stage it stopped at. */
export function problemOf(err: SessionError): SessionCallProblem {
  const stage = err instanceof SessionBusyError ? 'busy' : err instanceof SessionNotReadyError ? 'starting' : 'failed';
  return { stage, message: err.message, hint: err.hint, ...(err.mayHaveRun && { mayHaveRun: true }), ...(err.reason && { reason: err.reason }) };
}

/** `runtime`: the session's interpreter (a call may leave the language to the session). */
export type SessionCallResult = { ok: true; outcome: RunOutcome; runtime: KernelLanguage } | ({ ok: false } & SessionCallProblem);

/**
 * Whether code in `requested` may run in a session of `session`'s language: the same runtime
 * (javascript is node), or sh code in a bash session; no language means the session's.
 */
export function languageProblem(
  session: string,
  sessionLanguage: SessionLanguage,
  requested: Language | undefined,
  field?: string,
): SessionCallProblem | undefined {
  if (requested === undefined) return undefined;
  const runtime = normalizeLanguage(requested);
  if (kernelLanguage(sessionLanguage) === runtime || (runtime === 'sh' && sessionLanguage === 'bash')) return undefined;
  return {
    stage: 'refused',
    message: `Session ${session} runs ${sessionLanguage}, not ${requested}.`,
    hint:
      field === undefined
        ? `Send ${sessionLanguage} code to this session (or leave the language out), or create a ${requested} session.`
        : `Set ${field}: ${sessionLanguage} for this session (left out, it is python), or use a ${requested} session.`,
  };
}

export async function callInSession(
  sessions: SessionService,
  namespace: string,
  req: SessionCallRequest,
  onOutput?: (chunk: OutputChunk) => void,
): Promise<SessionCallResult> {
  // Another user's session is "not found", exactly like a name that does not exist.
  const info = await sessions.find(req.session, req.owner);
  if (!info) {
    return {
      ok: false,
      stage: 'refused',
      message: `There is no session "${req.session}".`,
      hint: 'Call list_sessions to see your sessions, or create_session to start a new one (idle sessions are deleted).',
    };
  }
  const wrongLanguage = languageProblem(req.session, info.language, req.language, req.languageField);
  if (wrongLanguage) return { ok: false, ...wrongLanguage };
  try {
    const { session, language: _checked, owner, ...call } = req;
    const r = await sessions.execute(session, call, onOutput ? (stream, text) => onOutput({ stream, text }) : undefined, owner);
    return { ok: true, outcome: sessionOutcome(r, namespace, req.timeoutSeconds), runtime: kernelLanguage(info.language) };
  } catch (err) {
    if (err instanceof SessionError) return { ok: false, ...problemOf(err) };
    throw err;
  }
}

/**
 * When the code of a call in a session started and ended: a call that waited for its session
 * started as long before `end` as the kernel says it ran, and never before `waitStart` whatever
 * the kernel claims.
 */
export function codeTimes(waitStart: Date, kernelDurationMs: number | undefined, end = new Date()): { start: Date; end: Date } {
  return { start: new Date(Math.max(waitStart.getTime(), end.getTime() - (kernelDurationMs ?? Infinity))), end };
}
