// What a failed upstream call is to the program (its ToolError kind) and to the metrics (the
// call's outcome), from the error's code (UpstreamError, src/upstreams/types.ts). The kinds are
// the ones the sandbox modules and runtime/PROTOCOL.md document: a program retries an
// `unavailable` call later, makes fewer calls at once after a `limit`, and gives up on `denied`.
import type { UpstreamErrorCode } from '../upstreams/types.js';
import type { CallOutcome } from './broker.js';
import type { FailureKind } from './frames.js';

export interface CallFailure {
  kind: FailureKind;
  outcome: CallOutcome;
  message: string;
}

const timeout = { kind: 'timeout', outcome: 'timeout' } as const;
const limit = { kind: 'limit', outcome: 'limit' } as const;
const denied = { kind: 'denied', outcome: 'denied' } as const;
const unavailable = { kind: 'unavailable', outcome: 'failed' } as const;

const BY_CODE: Record<UpstreamErrorCode, { kind: FailureKind; outcome: CallOutcome }> = {
  // The server's callTimeoutSeconds (shorter than the broker's), or the wait for a place in line.
  timeout,
  // Too many of the user's calls to the server wait already; the user's searches took their share.
  busy: limit,
  search_limit: limit,
  // The server or tool changed since the broker checked it (access lists, allow/deny, the catalog).
  unknown_server: denied,
  tool_denied: denied,
  unknown_tool: denied,
  // Not connected now, cancelled, or failed at the transport: the call may work later.
  not_ready: unavailable,
  aborted: unavailable,
  upstream_failed: unavailable,
};

/** MAX characters of an error's message the program gets. */
export const MAX_ERROR_CHARS = 500;

/**
 * The failure of `server.tool` that rejected with `err`. An UpstreamError's message says what went
 * wrong and what to do, naming the server: it is kept. Any other error (an UpstreamCaller of
 * another kind) is `unavailable`, its message prefixed with the call.
 */
export function callFailure(err: unknown, server: string, tool: string): CallFailure {
  const code = (err as { code?: unknown } | undefined)?.code;
  const known = typeof code === 'string' && Object.hasOwn(BY_CODE, code) ? BY_CODE[code as UpstreamErrorCode] : undefined;
  if (known) return { ...known, message: errorMessage(err) };
  return { ...unavailable, message: `${server}.${tool} failed: ${errorMessage(err)}` };
}

export function errorMessage(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).slice(0, MAX_ERROR_CHARS);
}
