// Telling "the API server did not answer" apart from "the API server answered with an error":
// only the first leaves the far side (a session kernel, a run) possibly intact and unknown.

const NETWORK_MESSAGE = /\b(ECONN[A-Z]+|ETIMEDOUT|EPIPE|EHOSTUNREACH|ENETUNREACH|EAI_AGAIN)\b|socket disconnected|socket hang up/;
/**
 * undici's (fetch's) codes for a connection that failed or closed before the whole answer came:
 * e.g. a proxy or load balancer in front of the API server dropping it ("other side closed").
 */
const UNDICI_NETWORK_CODE = /^UND_ERR_(SOCKET|CLOSED|CONNECT_TIMEOUT|HEADERS_TIMEOUT|BODY_TIMEOUT)$/;
/**
 * Node's own `ERR_*` codes for a connection that failed or closed; every other `ERR_*` code is
 * Node refusing a call (ERR_INVALID_ARG_TYPE, ERR_OUT_OF_RANGE, ERR_TLS_CERT_ALTNAME_INVALID …),
 * which fails the same way every time.
 */
const NODE_NETWORK_CODE = /^ERR_(SOCKET_[A-Z_]+|STREAM_PREMATURE_CLOSE|STREAM_DESTROYED|HTTP2_(GOAWAY_SESSION|SESSION_ERROR|STREAM_ERROR|STREAM_CANCEL))$/;

/** A system error's code (ECONNRESET, EAI_AGAIN …), or one of the network codes of Node or undici. */
const isNetworkCode = (code: string): boolean =>
  code.startsWith('ERR_') ? NODE_NETWORK_CODE.test(code) : /^E[A-Z_]+$/.test(code) || UNDICI_NETWORK_CODE.test(code);

/**
 * A socket-level failure (ECONNRESET, ECONNREFUSED, ETIMEDOUT, undici's UND_ERR_SOCKET, …)
 * anywhere in the error's cause chain. client-node rejects with a websocket ErrorEvent (the socket error in `.error`), an
 * Error, or fetch's TypeError with the socket error as its cause.
 */
export function isNetworkError(err: unknown, depth = 0): boolean {
  if (err === null || typeof err !== 'object' || depth > 5) return false;
  const e = err as { code?: unknown; error?: unknown; cause?: unknown; message?: unknown };
  if (typeof e.code === 'string' && isNetworkCode(e.code)) return true;
  if (typeof e.message === 'string' && NETWORK_MESSAGE.test(e.message)) return true;
  return isNetworkError(e.error, depth + 1) || isNetworkError(e.cause, depth + 1);
}

/** HTTP statuses an API server answers while it starts, stops or sheds load. */
const UNAVAILABLE_STATUS = new Set([429, 500, 502, 503, 504]);

/**
 * The API server was unreachable or said it cannot serve right now (a restart, an overload):
 * a network error, or one of those statuses (client-node's ApiException carries it in `code`),
 * anywhere in the cause chain.
 */
export function isApiUnavailable(err: unknown, depth = 0): boolean {
  if (err === null || typeof err !== 'object' || depth > 5) return false;
  const e = err as { code?: unknown; cause?: unknown };
  if (typeof e.code === 'number' && UNAVAILABLE_STATUS.has(e.code)) return true;
  return isNetworkError(err) || isApiUnavailable(e.cause, depth + 1);
}

/** ws's error for an upgrade answered with a status: the API server's (or the kubelet's behind it) 429 or 5xx. */
const UPGRADE_UNAVAILABLE = /Unexpected server response: (429|50[0234])\b/;

/**
 * An exec (WebSocket upgrade) the API server answered with 429 or 5xx, anywhere in the cause
 * chain: it, or the kubelet it dials for the exec, could not serve it (a restart, an overload).
 * Nothing reached the pod. A 4xx (the pod or its container not found) is not this.
 */
export function isUpgradeUnavailable(err: unknown, depth = 0): boolean {
  if (err === null || typeof err !== 'object' || depth > 5) return false;
  const e = err as { error?: unknown; cause?: unknown; message?: unknown };
  if (typeof e.message === 'string' && UPGRADE_UNAVAILABLE.test(e.message)) return true;
  return isUpgradeUnavailable(e.error, depth + 1) || isUpgradeUnavailable(e.cause, depth + 1);
}
