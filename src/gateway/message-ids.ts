// Request ids and progress tokens are the client's to choose, and neither JSON-RPC nor the SDK bounds
// their length; the gateway repeats them. A request's progress token is in every progress
// notification of its call (output coalesced every 50 ms, a heartbeat every 15 s: up to thousands
// in a call), and its id in its answer and its tool's log lines. The body budget counts the body
// once, not its echoes: a call with a 1 MiB token that printed for a second sent a 20 MiB response
// (measured), so one caller's calls with tokens near the 12 MiB body limit could hold gigabytes of
// the replica, unread, and end it with every other user's calls. Clients use numbers or UUIDs;
// a longer id or token is refused before anything in the request runs.

/** Characters a string id or progress token may have (a UUID is 36). */
export const MAX_ID_CHARS = 256;

/** Which of a message's client-chosen names is too long. */
export type OversizedId = 'id' | 'progressToken';

/** Pure: the first message of `body` (one message or a batch) whose id or progress token is over `max` characters. */
export function oversizedId(body: unknown, max = MAX_ID_CHARS): OversizedId | undefined {
  for (const message of Array.isArray(body) ? body : [body]) {
    if (typeof message !== 'object' || message === null) continue;
    const { id, params } = message as { id?: unknown; params?: unknown };
    if (typeof id === 'string' && id.length > max) return 'id';
    const meta = typeof params === 'object' && params !== null ? (params as { _meta?: unknown })._meta : undefined;
    const token = typeof meta === 'object' && meta !== null ? (meta as { progressToken?: unknown }).progressToken : undefined;
    if (typeof token === 'string' && token.length > max) return 'progressToken';
  }
  return undefined;
}

/** The JSON-RPC error for such a request (id null: its id is not repeated, whatever it is). */
export function oversizedIdRefused(which: OversizedId, max = MAX_ID_CHARS): Response {
  const what = which === 'id' ? 'request id' : 'progress token (params._meta.progressToken)';
  const message = `Invalid Request: a ${what} in this request is longer than ${max} characters, the most this gateway accepts (it is repeated in what the gateway sends back). Nothing in it was run. Use a number or a short string such as a UUID.`;
  return Response.json({ jsonrpc: '2.0', error: { code: -32600, message, data: { limit: `${which}_length`, max } }, id: null }, { status: 400 });
}
