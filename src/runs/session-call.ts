// The one path of a call in a session, shared by the gateway's execute_code (session argument) and
// by a SandboxRun with spec.session: find the caller's session, check the language with one rule,
// run the code in the session's interpreter, and shape the result as a RunOutcome.
import { kernelLanguage, normalizeLanguage, type KernelLanguage, type Language, type Owner, type SessionLanguage } from '../api/v1alpha1/index.js';
import { SessionError, type SessionService } from '../sessions/service.js';
import { sessionOutcome } from './session-outcome.js';
import type { OutputChunk, RunOutcome } from './types.js';
import type { CallHandler } from '../exec/kernel.js';

export interface SessionCallRequest {
  session: string;
  code: string;
  timeoutSeconds: number;
  stdin?: string;
  /** The language the caller asked for; undefined means "the session's". */
  language?: Language;
  owner?: Owner;
  /** Answers the code's nested tool calls (code mode). */
  onCall?: CallHandler;
}

/** Why a call did not run: refused before the code reached the interpreter, or failed there. */
export interface SessionCallProblem {
  stage: 'refused' | 'failed';
  message: string;
  hint: string;
}

/** `runtime`: the session's interpreter (a call may leave the language to the session). */
export type SessionCallResult = { ok: true; outcome: RunOutcome; runtime: KernelLanguage } | ({ ok: false } & SessionCallProblem);

/**
 * Whether code in `requested` may run in a session of `session`'s language: the same runtime
 * (javascript is node), or sh code in a bash session; no language means the session's.
 */
export function languageProblem(session: string, sessionLanguage: SessionLanguage, requested: Language | undefined): SessionCallProblem | undefined {
  if (requested === undefined) return undefined;
  const runtime = normalizeLanguage(requested);
  if (kernelLanguage(sessionLanguage) === runtime || (runtime === 'sh' && sessionLanguage === 'bash')) return undefined;
  return {
    stage: 'refused',
    message: `Session ${session} runs ${sessionLanguage}, not ${requested}.`,
    hint: `Send ${sessionLanguage} code to this session (or leave the language out), or create a ${requested} session.`,
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
  const wrongLanguage = languageProblem(req.session, info.language, req.language);
  if (wrongLanguage) return { ok: false, ...wrongLanguage };
  try {
    const r = await sessions.execute(
      req.session,
      { code: req.code, timeoutSeconds: req.timeoutSeconds, ...(req.stdin !== undefined && { stdin: req.stdin }), ...(req.onCall && { onCall: req.onCall }) },
      onOutput ? (stream, text) => onOutput({ stream, text }) : undefined,
      req.owner,
    );
    return { ok: true, outcome: sessionOutcome(r, namespace, req.timeoutSeconds), runtime: kernelLanguage(info.language) };
  } catch (err) {
    if (err instanceof SessionError) return { ok: false, stage: 'failed', message: err.message, hint: err.hint };
    throw err;
  }
}
