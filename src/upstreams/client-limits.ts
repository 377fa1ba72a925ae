// What the gateway lets an upstream make its SDK client do (connection.ts): keep no copy of the
// upstream's answers, run none of its schemas, answer few of its requests, and reopen its event
// stream no faster than once a second. Each one closes a way an upstream held the gateway's
// event loop or heap (an audit's hostile-upstream probes).
import type {
  JSONRPCMessage,
  JsonSchemaValidator,
  MessageExtraInfo,
  ReconnectionScheduler,
  ResponseCacheStore,
  Transport,
  jsonSchemaValidator,
} from '@modelcontextprotocol/client';

/**
 * A response cache that keeps nothing. The SDK's default keeps the whole uncut `tools/list`
 * aggregate (a JSON copy of up to listMaxPages pages) and derives from it an output-schema
 * validator for every listed tool, compiled on the first call after each refresh (2,000 tools:
 * ~3 s of event loop and +31 MB of heap per refresh, never freed). With nothing held, callTool
 * finds no schema to validate against: the gateway cuts and bounds results itself.
 */
export const keepNothing: ResponseCacheStore = {
  get: () => undefined,
  set: () => 0,
  delete: () => undefined,
  evict: () => undefined,
  clear: () => undefined,
};

/**
 * Compiles no schema: the upstream's output schema (and its `pattern` regexes, which ran on the
 * gateway thread against results shaped by sandbox input: 30 chars, 2.4 s) is the upstream's own
 * business. Only reached through a tool definition that carries an outputSchema, which the
 * gateway never passes (connection.ts strips it); this keeps the SDK's Ajv from being built too.
 */
export const validateNothing: jsonSchemaValidator = {
  getValidator<T>(): JsonSchemaValidator<T> {
    return (input) => ({ valid: true, data: input as T, errorMessage: undefined });
  },
};

/** Shortest wait before the event stream is reopened, whatever the upstream's `retry:` says. */
export const MIN_RECONNECT_MS = 1000;
/** Longest wait; also the cap on a server's `retry:` (the stream carries list_changed). */
export const MAX_RECONNECT_MS = 30_000;

/**
 * Schedules the reopening of a Streamable HTTP event stream (the transport's
 * reconnectionScheduler): at least MIN_RECONNECT_MS after it ended, doubling while streams end
 * soon after they were reopened. The SDK alone waits the server's `retry:` (0 is allowed) and
 * counts a stream that opened and ended as a success, so an upstream answering each GET with
 * `retry: 0` and an end was reopened ~475 times a second. One scheduler per transport.
 */
export function gentleReconnects(now: () => number = Date.now): ReconnectionScheduler {
  let wait = MIN_RECONNECT_MS;
  let reopenedAt = -Infinity;
  return (reconnect, delay) => {
    // A stream that stayed open longer than the longest wait was a healthy one: start over.
    if (now() - reopenedAt > MAX_RECONNECT_MS) wait = MIN_RECONNECT_MS;
    const ms = Math.min(MAX_RECONNECT_MS, Math.max(wait, delay));
    wait = Math.min(MAX_RECONNECT_MS, wait * 2);
    const timer = setTimeout(() => {
      reopenedAt = now();
      reconnect();
    }, ms);
    timer.unref();
    return () => clearTimeout(timer);
  };
}

/** Requests from an upstream answered at once; more are dropped. */
export const SERVER_REQUESTS_IN_FLIGHT = 4;
/** Requests from an upstream answered per second; more are dropped. */
export const SERVER_REQUESTS_PER_SECOND = 10;

const isRequest = (m: JSONRPCMessage): m is JSONRPCMessage & { method: string; id: string | number } => 'method' in m && 'id' in m;
const isResponse = (m: JSONRPCMessage): boolean => !('method' in m) && 'id' in m;

/**
 * Bounds the requests an upstream sends the gateway (ping, sampling, elicitation, roots: on its
 * event stream or inside a call's answer). Each answer is a POST of its own, and an upstream can
 * write requests as fast as it likes: 20,000 pings made 20,000 concurrent POSTs (1.1 GB of heap,
 * 9 s of stall). The gateway declares no client capabilities, so it has nothing to offer them
 * but a pong or "method not found". Past SERVER_REQUESTS_IN_FLIGHT unanswered, or
 * SERVER_REQUESTS_PER_SECOND in the current second, a request is dropped unanswered: an answer
 * without a POST does not exist on this transport, and the upstream's own timeout ends its wait.
 * `onDrop` hears of the first drop of each second.
 *
 * The SDK sets the transport's onmessage itself (on connect), so the bound wraps whatever it
 * sets; an answer stops counting as in flight when its POST settles.
 */
export function limitServerRequests(
  transport: Transport,
  onDrop: (method: string) => void,
  now: () => number = Date.now,
  /**
   * Told of each request of ours that is over: answered by the upstream (after the SDK took the
   * answer), or given up by the SDK (it sends notifications/cancelled on a timeout or an abort).
   */
  onOver?: (id: string | number) => void,
): void {
  let inFlight = 0;
  let windowStart = -Infinity;
  let admitted = 0;
  let dropped = false;
  const admit = (method: string): boolean => {
    const t = now();
    if (t - windowStart >= 1000) [windowStart, admitted, dropped] = [t, 0, false];
    if (inFlight < SERVER_REQUESTS_IN_FLIGHT && admitted < SERVER_REQUESTS_PER_SECOND) {
      inFlight++;
      admitted++;
      return true;
    }
    if (!dropped) onDrop(method);
    dropped = true;
    return false;
  };
  // The SDK sets the handler more than once (a version probe sets its own and restores the one
  // before; Protocol.connect chains the one it finds before its own): each is guarded, and a
  // request is counted once, however many guarded handlers it passes.
  const counted = new WeakSet<JSONRPCMessage>();
  let guarded: Transport['onmessage'];
  Object.defineProperty(transport, 'onmessage', {
    configurable: true,
    enumerable: true,
    get: () => guarded,
    set: (h: Transport['onmessage']) => {
      guarded =
        h &&
        (((message: JSONRPCMessage, extra?: MessageExtraInfo) => {
          if (isRequest(message) && !counted.has(message)) {
            if (!admit(message.method)) return;
            counted.add(message);
          }
          h(message, extra);
          if (onOver && isResponse(message)) onOver((message as { id: string | number }).id);
        }) as NonNullable<Transport['onmessage']>);
    },
  });
  const send = transport.send.bind(transport);
  transport.send = async (message, options) => {
    const cancelled = cancelledId(message);
    if (cancelled !== undefined) onOver?.(cancelled);
    if (!isResponse(message)) return send(message, options);
    try {
      return await send(message, options);
    } finally {
      inFlight = Math.max(0, inFlight - 1);
    }
  };
}

/** The request a notifications/cancelled of ours gives up, if `message` is one. */
function cancelledId(message: JSONRPCMessage): string | number | undefined {
  if (!('method' in message) || message.method !== 'notifications/cancelled') return undefined;
  const id = (message as { params?: { requestId?: unknown } }).params?.requestId;
  return typeof id === 'string' || typeof id === 'number' ? id : undefined;
}
