// The fetch the gateway's upstream MCP clients use: no single message from an upstream may make the
// gateway hold more than `maxBytes`. The SDK's client reads a whole JSON body, or whole SSE events,
// into memory before looking at them, so an upstream answering with a gigabyte (a buggy server, a
// third-party stdio server, a tool that returns a whole disk) would otherwise exhaust the gateway.
//
// Hand-written because no library bounds a fetch body per SSE event. Bounded per message, not per
// response: the notification stream (GET) and a long call's progress events may go on for hours.
// - POST answered with JSON: the body is read up to the bound; past it, the answer becomes a
//   JSON-RPC error for the request's id, so the call fails at once with a sentence that says why.
// - SSE (POST or GET): events are passed on whole, each buffered up to the bound (events end at a
//   blank line); an event past it is dropped — on a POST the stream then ends with that error
//   event (a call's answer is its last event), on the GET stream the event alone is skipped.
// What an upstream sends is never logged; `onDropped` says only which kind of message was cut.

import { ByteAccumulator } from '../util/byte-accumulator.js';
import { DebtBucket } from '../util/debt-bucket.js';

export type FetchLike = (url: string | URL, init?: RequestInit) => Promise<Response>;

/** JSON-RPC "server error" range: the gateway refused the upstream's answer. */
export const RESPONSE_TOO_LARGE_CODE = -32001;

export function tooLargeMessage(maxBytes: number): string {
  return `The upstream's answer was larger than ${maxBytes} bytes (CODEMODE_UPSTREAM_MESSAGE_MAX_BYTES), so the gateway dropped it. Ask for less (a page, a filter), or ask the administrator to raise the bound.`;
}

/** The id of the JSON-RPC request in a POST body, or null (a notification, a batch, unreadable). */
export function requestId(body: RequestInit['body']): string | number | null {
  if (typeof body !== 'string') return null;
  try {
    const msg = JSON.parse(body) as { id?: unknown };
    return typeof msg.id === 'string' || typeof msg.id === 'number' ? msg.id : null;
  } catch {
    return null;
  }
}

function errorMessage(id: string | number | null, maxBytes: number): string {
  return JSON.stringify({ jsonrpc: '2.0', id, error: { code: RESPONSE_TOO_LARGE_CODE, message: tooLargeMessage(maxBytes) } });
}

/** Where the blank line that ends an SSE event is in `buf` (searching from `from`), and its length. */
export function eventEnd(buf: Buffer, from: number): { at: number; length: number } | undefined {
  for (let i = Math.max(0, from); i < buf.length - 1; i++) {
    if (buf[i] !== 0x0a && buf[i] !== 0x0d) continue;
    // \n\n, \r\r, \r\n\r\n, and the mixed \n\r\n / \r\n\n forms all end an event.
    // A lone \r ends a line only when no \n follows (else it is half of \r\n).
    const m = /^(?:\r\n|\n|\r(?!\n))(?:\r\n|\n|\r)/.exec(buf.toString('latin1', i, Math.min(buf.length, i + 4)));
    if (m) return { at: i, length: m[0].length };
  }
  return undefined;
}

/** SSE events one upstream's streams may bring a second, all of them together, in the long run. */
export const EVENTS_PER_SECOND = 200;
/** ... after a burst of this many. */
export const EVENTS_BURST = 1000;

/** What a stream charges its events to (an EventPace), and who hears that it waits. */
export type Pace = { take(events: number): number; onPaced?(): void };

/**
 * The pace of one upstream's events (a token bucket over all its streams): what the SDK does with
 * each event (parse, validate, dispatch) is the gateway's CPU, on the event loop every user shares.
 * An upstream writing notifications as fast as it could took it: a call to the same gateway went
 * from 0.8 ms to 70 ms. Past the pace a stream is read no further until its events are due, so the
 * upstream meets TCP back-pressure rather than the gateway doing the work. A call's answer is not
 * counted (answerFree), and progress or log notifications come a few a second.
 */
export class EventPace extends DebtBucket {
  constructor(perSecond = EVENTS_PER_SECOND, burst = EVENTS_BURST, now?: () => number) {
    super(burst, perSecond, now);
  }

  /** Takes `events`; how long (ms) to wait before reading more: 0 while within the pace. */
  take(events: number): number {
    return this.charge(events);
  }
}

/**
 * Splits an SSE byte stream into whole events of at most `maxBytes` each (blank line included).
 * `onOversize` is called for each event past the bound, which is skipped; it returns the text to
 * put in its place and whether the stream ends there.
 */
export function boundedEvents(
  maxBytes: number,
  onOversize: () => { replacement: string; end: boolean },
  /** Called once when the stream is over: ended, cut off, cancelled or failed. */
  onDone: () => void = () => undefined,
  /** Given the function that ends the stream from outside (after the events passed on so far). */
  onEnd?: (end: () => void) => void,
  /** The pace of events: past it, the next chunk is read only once they are due (EventPace). */
  pace?: Pace,
): TransformStream<Uint8Array, Uint8Array> {
  // The bytes not yet passed on: the event being read (and, within one chunk, the events after it).
  // One growing buffer, compacted only after an event ended: an event in many small chunks costs
  // its size, not its size per chunk.
  const pending = new ByteAccumulator();
  /** Bytes of `pending` already searched for an event's end. */
  let scanned = 0;
  /** Inside an oversized event: bytes are dropped until its end. */
  let skipping = false;
  let ended = false;
  return new TransformStream({
    start(controller) {
      onEnd?.(() => {
        if (ended) return;
        ended = true;
        controller.terminate();
        onDone();
      });
    },
    transform(chunk, controller) {
      if (ended) return;
      pending.append(chunk);
      const buf = pending.view();
      /** Where the event being read starts in `buf`. */
      let start = 0;
      let events = 0;
      for (;;) {
        const end = eventEnd(buf, Math.max(start, scanned - 3));
        // The event (or what has come of it) is past the bound: drop it, say so once.
        if (!skipping && (end ? end.at : buf.length) - start > maxBytes) {
          skipping = true;
          const r = onOversize();
          if (r.replacement) controller.enqueue(Buffer.from(r.replacement));
          if (r.end) {
            ended = true;
            controller.terminate();
            onDone();
            return;
          }
        }
        if (!end) break;
        const stop = end.at + end.length;
        // A view: `pending` moves what it keeps into new memory below, never writing over this.
        if (!skipping) controller.enqueue(buf.subarray(start, stop));
        skipping = false;
        start = stop;
        scanned = stop;
        events++;
      }
      // Keep what follows the last event's end; while skipping, only the last bytes (a blank line
      // may straddle two chunks).
      const keepFrom = skipping ? Math.max(start, buf.length - 3) : start;
      if (keepFrom > 0) {
        pending.take();
        pending.append(buf.subarray(keepFrom));
      }
      scanned = pending.size;
      const wait = events > 0 && pace ? pace.take(events) : 0;
      if (wait <= 0) return;
      pace?.onPaced?.();
      // Returning a promise holds the pipe: the next chunk is not read from the upstream until then.
      return new Promise<void>((resolve) => setTimeout(resolve, wait));
    },
    flush(controller) {
      if (!ended && !skipping && pending.size > 0) controller.enqueue(pending.take());
      onDone();
    },
    // The reader cancelled, or the body failed (the pipe aborts the writable side).
    cancel() {
      onDone();
    },
  });
}

/**
 * A signal of the request's own, aborted with the caller's until `release()`. The MCP client
 * passes its transport's one long-lived signal to every request; undici hangs a listener on the
 * signal per request and lets it go only when the request object is garbage collected, so a busy
 * upstream connection piled up thousands of them (and from 1,500 on, Node wrote a
 * MaxListenersExceededWarning with a stack trace to stderr on every call). Released as soon as
 * the response is read, the caller's signal holds one listener per request in flight.
 */
export function linkedSignal(outer: AbortSignal | null | undefined): { signal: AbortSignal | null | undefined; release: () => void } {
  if (!outer || outer.aborted) return { signal: outer, release: () => undefined };
  const inner = new AbortController();
  const onAbort = (): void => inner.abort(outer.reason);
  outer.addEventListener('abort', onAbort, { once: true });
  let released = false;
  return {
    signal: inner.signal,
    release: () => {
      if (released) return;
      released = true;
      outer.removeEventListener('abort', onAbort);
    },
  };
}

/** Reads a (non-SSE) body up to `maxBytes`; undefined when it is longer (the rest is cancelled). */
async function readBounded(body: ReadableStream<Uint8Array>, maxBytes: number): Promise<Buffer | undefined> {
  const reader = body.getReader();
  // One growing buffer, not a Buffer per chunk: an upstream may answer in tiny chunks.
  const bytes = new ByteAccumulator(maxBytes);
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return bytes.take();
    if (bytes.size + value.byteLength > maxBytes) {
      await reader.cancel().catch(() => undefined);
      return undefined;
    }
    bytes.append(value);
  }
}

const NULL_BODY_STATUSES = new Set([101, 204, 205, 304]);

/**
 * The event streams that carry the answers to POSTed requests, by request id, so each can be ended
 * once its answer was read (answered()). The SDK reads such a stream to its end, and an upstream
 * that kept it open after the answer kept its connection and this stream's state for every call
 * (one per call, for as long as the upstream liked: the spec says it SHOULD close it).
 */
export class AnswerStreams {
  private readonly open = new Map<string | number, () => void>();

  add(id: string | number, end: () => void): void {
    this.open.set(id, end);
  }

  /** The stream of `id` is over (ended here or by the upstream). */
  delete(id: string | number, end: () => void): void {
    if (this.open.get(id) === end) this.open.delete(id);
  }

  /** The answer to request `id` was read (or the request was given up): its stream has nothing more to carry. */
  answered(id: string | number): void {
    this.open.get(id)?.();
  }

  get size(): number {
    return this.open.size;
  }
}

/**
 * `pace` for a call's event stream: its first event (usually the answer, the only one) is not
 * counted, so calls answered on event streams are not paced however many there are; the
 * notifications a stream carries besides are.
 */
function answerFree(pace: Pace): Pace {
  let free = 1;
  return {
    take: (events) => {
      const counted = events - Math.min(free, events);
      free = Math.max(0, free - events);
      return counted > 0 ? pace.take(counted) : 0;
    },
    ...(pace.onPaced && { onPaced: () => pace.onPaced?.() }),
  };
}

export function boundedFetch(
  maxBytes: number,
  onDropped: (kind: 'json' | 'event' | 'stream-event') => void,
  base: FetchLike = fetch,
  /** Where a POST's event stream is registered, to be ended once its answer was read. */
  answers?: AnswerStreams,
  /** The pace of events over all of this upstream's streams (EventPace). */
  pace?: Pace,
): FetchLike {
  return async (url, init) => {
    const link = linkedSignal(init?.signal);
    // An SSE body hands the release over to its stream; every other outcome releases here.
    let streaming = false;
    try {
      const res = await base(url, link.signal === init?.signal ? init : { ...init, signal: link.signal });
      if (!res.body || NULL_BODY_STATUSES.has(res.status)) return res;
      const post = (init?.method ?? 'GET').toUpperCase() === 'POST';
      const id = post ? requestId(init?.body) : null;
      const type = res.headers.get('content-type') ?? '';
      if (type.includes('text/event-stream')) {
        let end: (() => void) | undefined;
        const body = res.body.pipeThrough(
          boundedEvents(
            maxBytes,
            () => {
              onDropped(post ? 'event' : 'stream-event');
              // A call's stream: its answer is gone, so the error takes its place and the stream ends.
              return post ? { replacement: `event: message\ndata: ${errorMessage(id, maxBytes)}\n\n`, end: true } : { replacement: '', end: false };
            },
            () => {
              if (id !== null && end) answers?.delete(id, end);
              link.release();
            },
            (e) => (end = e),
            pace && (post ? answerFree(pace) : pace),
          ),
        );
        if (id !== null && end) answers?.add(id, end);
        streaming = true;
        return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
      }
      const text = await readBounded(res.body, maxBytes);
      if (text !== undefined) return new Response(new Uint8Array(text), { status: res.status, statusText: res.statusText, headers: res.headers });
      onDropped('json');
      const headers = new Headers(res.headers);
      headers.delete('content-length');
      headers.set('content-type', 'application/json');
      return new Response(errorMessage(id, maxBytes), { status: res.status, statusText: res.statusText, headers });
    } finally {
      if (!streaming) link.release();
    }
  };
}
