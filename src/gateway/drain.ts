// How a replica leaves after SIGTERM without failing a call: readiness is off (the Service stops
// sending new connections), every response closes its connection (app.ts, so a client's next
// request opens a connection the Service routes elsewhere), and the replica keeps serving until
// MCP requests have stopped arriving; then the caller stops the operator and closes the server.
//
// Idle keep-alive connections are deliberately NOT closed while calls may still arrive: closing
// one races with a client that is sending on it at that moment, and a client whose event loop is
// busy learns of the close late, so its POST is lost with a connection reset (fetch does not retry
// a POST) — the suspected cause of a "fetch failed" seen once from a replica being stopped in
// the second-replica fault test (not reproduced). A connection left idle needs no closing to move
// its client: its next request is answered here with `Connection: close`. server.close() closes the idle ones at the end, once none has been
// used for the quiet period.
//
// The wait for quiet is bounded (`maxMs`): a client that keeps calling the replica directly (its
// pod address, or a proxy that still routes to it) would otherwise hold it, and every run it
// started late would be cut when the shutdown's grace period ran out (exit 1). Past it, MCP
// requests are refused with 503 and Retry-After, which tells the client to call again (through
// the Service, elsewhere), and the drain ends once those in flight have been answered — their
// responses ended, not only returned (see McpTraffic.fetch).
import type { ServerResponse } from 'node:http';

/** When a draining replica may stop. */
export interface DrainTimes {
  /** Serve at least this long after the drain began (endpoints update meanwhile). */
  minMs: number;
  /** …and until no MCP request has arrived for this long… */
  quietMs: number;
  /** …or until this long after the drain began: later MCP requests are refused (503). Absent: no bound. */
  maxMs?: number;
}

export interface TrafficState {
  inFlight: number;
  /** Date.now() of the last MCP request's arrival (0: none yet). */
  lastArrival: number;
}

/** Pure: whether a replica draining since `startedAt` may stop at `now`. */
export function drainSettled(s: TrafficState, startedAt: number, now: number, t: DrainTimes): boolean {
  return now - startedAt >= t.minMs && s.inFlight === 0 && (now - s.lastArrival >= t.quietMs || drainRefusing(startedAt, now, t));
}

/** Pure: whether a replica draining since `startedAt` refuses MCP requests at `now`. */
export function drainRefusing(startedAt: number, now: number, t: DrainTimes): boolean {
  return t.maxMs !== undefined && now - startedAt >= t.maxMs;
}

/** The answer to an MCP request that reached a replica too late in its drain. */
export function drainRefused(): Response {
  const message =
    'This gateway replica is shutting down and takes no more requests. Nothing in this request was run. Retry: a new connection reaches a replica that stays.';
  return Response.json(
    { jsonrpc: '2.0', error: { code: -32000, message, data: { limit: 'shutting_down' } }, id: null },
    { status: 503, headers: { 'Retry-After': '1', Connection: 'close' } },
  );
}

type Fetch = (req: Request, env: unknown) => Response | Promise<Response>;

/** Requests answered with a stream that lasts as long as its client listens (subscriptions/listen). */
const listens = new WeakSet<Request>();

/**
 * Marks `req` (as McpTraffic's handler got it) as a listen: not a call, so no drain waits for its
 * stream to end (main.ts ends listen streams when the shutdown begins).
 */
export function markListen(req: Request): void {
  listens.add(req);
}

/**
 * `res` with `done` called once its handler has streamed all of its body (or failed to), however
 * slowly its client reads it: the body is read on into a queue without a bound, which holds what
 * the handler's own stream would have (that one does not bound its queue either).
 */
function whenStreamed(res: Response, done: () => void): Response {
  // A whole body (JSON) is handed to the socket at once: its `prefinish` tells.
  if (res.body === null || !res.headers.get('content-type')?.startsWith('text/event-stream')) return res;
  const source = res.body.getReader();
  const pump = async (controller: ReadableStreamDefaultController<Uint8Array>): Promise<void> => {
    try {
      for (;;) {
        const chunk = await source.read();
        if (chunk.done) break;
        controller.enqueue(chunk.value);
      }
      controller.close();
    } catch (err) {
      controller.error(err);
    } finally {
      done();
    }
  };
  const body = new ReadableStream<Uint8Array>({
    start: (controller) => void pump(controller),
    cancel: (reason) => source.cancel(reason),
  });
  return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
}

const POLL_MS = 100;

/** Counts the MCP requests arriving and in flight through a server's fetch handler. */
export class McpTraffic {
  private readonly state: TrafficState = { inFlight: 0, lastArrival: 0 };
  /** Date.now() from which MCP requests are refused (the drain's maxMs). */
  private refuseFrom = Infinity;

  constructor(private readonly inner: Fetch) {}

  /**
   * The handler to serve: probes and scrapes keep coming to a stopping pod, so only /mcp counts. A
   * request is in flight until its response has ended, not only until the handler returns it: a
   * tool call answers on a streamed (SSE) response returned before the call has even started, so
   * the drain ended under every call in flight — sessions' calls were cut off by the operator's
   * stop and their audit records dropped.
   */
  readonly fetch = async (req: Request, env: unknown): Promise<Response> => {
    if (!new URL(req.url).pathname.startsWith('/mcp')) return this.inner(req, env);
    // Not counted: a refused request holds nothing, and must not keep the drain from ending.
    if (Date.now() >= this.refuseFrom) return drainRefused();
    this.state.inFlight++;
    this.state.lastArrival = Date.now();
    let counted = true;
    const end = (): void => {
      if (counted) this.state.inFlight--;
      counted = false;
    };
    try {
      const res = await this.inner(req, env);
      // On the Node server, until the response's `close` (also when the client goes away), its
      // `prefinish` (ended: its last bytes are handed to the socket) or, for a streamed one, the
      // end of what the handler streams into it, whichever is first: the bytes of a client that
      // reads its result slowly (never cut: stall-guard.ts) wait in the stream, and that client
      // must not hold a stopping replica until the end of its grace period. Without one
      // (app.request in tests) the response has ended when it is returned.
      const outgoing = (env as { outgoing?: ServerResponse } | undefined)?.outgoing;
      if (outgoing === undefined || typeof outgoing.once !== 'function' || outgoing.closed || outgoing.writableEnded || listens.has(req)) {
        end();
        return res;
      }
      outgoing.once('close', end);
      outgoing.once('prefinish', end);
      return whenStreamed(res, end);
    } catch (err) {
      end();
      throw err;
    }
  };

  /**
   * Resolves once the drain that begins now may end (drainSettled), polling every 100 ms; refuses
   * MCP requests from maxMs on, and from the moment it resolves: the operator stops next (its
   * Lease released, so other replicas fail the runs it still holds), and a run a late request
   * started then would be failed by them while it executes here.
   */
  settled(times: DrainTimes): Promise<void> {
    const startedAt = Date.now();
    if (times.maxMs !== undefined) this.refuseFrom = startedAt + times.maxMs;
    return new Promise((resolve) => {
      const timer = setInterval(() => {
        if (!drainSettled(this.state, startedAt, Date.now(), times)) return;
        clearInterval(timer);
        this.refuseFrom = Math.min(this.refuseFrom, Date.now());
        resolve();
      }, POLL_MS);
    });
  }
}
