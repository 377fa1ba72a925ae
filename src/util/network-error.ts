// Telling "the API server did not answer" apart from "the API server answered with an error":
// only the first leaves the far side (a session kernel, a run) possibly intact and unknown.

const NETWORK_MESSAGE = /\b(ECONN[A-Z]+|ETIMEDOUT|EPIPE|EHOSTUNREACH|ENETUNREACH|EAI_AGAIN)\b|socket disconnected|socket hang up/;

/**
 * A socket-level failure (ECONNRESET, ECONNREFUSED, ETIMEDOUT, …) anywhere in the error's cause
 * chain. client-node rejects with a websocket ErrorEvent (the socket error in `.error`), an
 * Error, or fetch's TypeError with the socket error as its cause.
 */
export function isNetworkError(err: unknown, depth = 0): boolean {
  if (err === null || typeof err !== 'object' || depth > 5) return false;
  const e = err as { code?: unknown; error?: unknown; cause?: unknown; message?: unknown };
  if (typeof e.code === 'string' && /^E[A-Z_]+$/.test(e.code)) return true;
  if (typeof e.message === 'string' && NETWORK_MESSAGE.test(e.message)) return true;
  return isNetworkError(e.error, depth + 1) || isNetworkError(e.cause, depth + 1);
}
