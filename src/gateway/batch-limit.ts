// JSON-RPC batch cap (CODEMODE_MAX_BATCH_SIZE). 2025-03-26 clients may POST an array of messages;
// the MCP SDK's transport runs every tools/call in it concurrently and refuses only arrays over
// its own hard 100. A longer batch than ours is refused here, before anything of it reaches the
// transport, with HTTP 400 and a JSON-RPC error that states the limit. Anything else (not a
// POST, not JSON, too large, unparseable) goes to the SDK as it was sent, which answers it as before.
// Two more bounds apply here, where the body is read: its bytes are taken from the caller's share
// of the replica's body budget before they are kept (body-budget.ts; a short body's whole declared
// length at once, a long one's as they arrive: RESERVED_AHEAD_MAX_BYTES), and a body of too many
// JSON values is refused before it is parsed (json-shape.ts), and a body that stops arriving is
// answered 408 (body-progress.ts).
import { bodyStalledRefused, type BodyStall } from './body-progress.js';
import { jsonShapeProblem, jsonShapeRefused } from './json-shape.js';

/** Which bound a refused request met (the log, and the metric's label for all but json_shape). */
export type BodyCheckLimit = 'batch_size' | 'body_progress' | 'json_shape' | 'request_bytes' | 'user_request_bytes';

/** A request refused: the answer to send, and the bound it met. */
export interface BodyRefusal {
  refused: Response;
  limit: BodyCheckLimit;
}

/** Takes `bytes` more of the caller's body budget, or returns the refusal of the request. */
export type ReserveBytes = (bytes: number) => BodyRefusal | undefined;

export interface BatchCheck extends Partial<BodyRefusal> {
  /** The body, already parsed: handed to the SDK, which then does not read the request's body. */
  parsedBody?: unknown;
  /** Serve this request instead of the original, whose body was read (and so is used up). */
  request?: Request;
}

/** The JSON-RPC error for a batch over the cap (id null: a batch has no single id). */
export function batchTooLarge(received: number, max: number): Response {
  const message =
    `Invalid Request: this JSON-RPC batch holds ${received} messages; the limit is ${max} ` +
    `(CODEMODE_MAX_BATCH_SIZE). Nothing in it was run. Send at most ${max} messages per request.`;
  return Response.json({ jsonrpc: '2.0', error: { code: -32600, message, data: { limit: 'batch_size', max, received } }, id: null }, { status: 400 });
}

function isJson(contentType: string | null): boolean {
  return (contentType ?? '').split(';')[0]?.trim().toLowerCase() === 'application/json';
}

interface BodyRead {
  /** The whole body as text; undefined when it was longer than allowed or could not be read. */
  text?: string;
  /** The bytes taken from the body so far (all of them when text is set). */
  chunks: Uint8Array[];
  /** The rest of the body, when it was not read to its end. */
  reader?: ReadableStreamDefaultReader<Uint8Array>;
  failure?: { error: unknown };
  /** The budget had no room for the next chunk: the request is refused. */
  refusal?: BodyRefusal;
}

/** The request refused for a body that stopped arriving (its bytes so far given back when its response ends). */
function stalled(stall: BodyStall): BodyRead {
  return { chunks: [], refusal: closing({ refused: bodyStalledRefused(stall), limit: 'body_progress' }) };
}

/**
 * `reading`, or the stall `stall` reports first (the read is then left to fail when the
 * connection closes). Without a watch, `reading` itself.
 */
function unlessStalled<T>(reading: Promise<T>, stall: Promise<BodyStall> | undefined): Promise<T | { stall: BodyStall }> {
  if (!stall) return reading;
  reading.catch(() => undefined);
  return Promise.race([reading, stall.then((s) => ({ stall: s }))]);
}

/** Reads at most maxBytes of a body from the request itself (no clone: see {@link replay}). */
async function readBounded(body: ReadableStream<Uint8Array>, maxBytes: number, reserve: ReserveBytes, stall?: Promise<BodyStall>): Promise<BodyRead> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const chunks: Uint8Array[] = [];
  let received = 0;
  let text = '';
  try {
    for (;;) {
      const next = await unlessStalled(reader.read(), stall);
      if ('stall' in next) {
        reader.cancel().catch(() => undefined);
        return stalled(next.stall);
      }
      const { done, value } = next;
      if (done) return { text: text + decoder.decode(), chunks, reader };
      const refusal = reserve(value.byteLength);
      if (refusal) {
        reader.cancel().catch(() => undefined);
        return { chunks, refusal: closing(refusal) };
      }
      chunks.push(value);
      received += value.byteLength;
      if (received > maxBytes) return { chunks, reader };
      text += decoder.decode(value, { stream: true });
    }
  } catch (error) {
    return { chunks, reader, failure: { error } };
  }
}

/**
 * `refusal`, answered with `Connection: close`: the rest of its body is not read (the connection
 * closes after the answer), which a client must know so as not to send its next request there.
 */
function closing(refusal: BodyRefusal): BodyRefusal {
  const headers = new Headers(refusal.refused.headers);
  headers.set('connection', 'close');
  return { ...refusal, refused: new Response(refusal.refused.body, { status: refusal.refused.status, headers }) };
}

/**
 * A body of declared length, read whole: on the gateway's Node server (@hono/node-server)
 * `arrayBuffer()` reads the socket directly, where `request.body` would first build a Web
 * `Request` and a Web stream over it (~0.1 ms of CPU a call back to back, ~1 ms after an idle
 * pause). Node's HTTP parser ends the body at its declared length (checked against the limit).
 */
async function readDeclared(request: Request, maxBytes: number, stall?: Promise<BodyStall>): Promise<BodyRead> {
  try {
    const read = await unlessStalled(request.arrayBuffer(), stall);
    if ('stall' in read) return stalled(read.stall);
    const bytes = new Uint8Array(read);
    return bytes.byteLength > maxBytes ? { chunks: [bytes] } : { text: new TextDecoder().decode(bytes), chunks: [bytes] };
  } catch (error) {
    return { chunks: [], failure: { error } };
  }
}

/**
 * The request as the client sent it, for the SDK to answer in our place (unparseable, empty or
 * over-size bodies): the bytes already read, then whatever the body still holds, or its read
 * error. Serving every request from the original body instead of a `Request.clone()` saves the
 * tee of every call's body; this rebuild happens only on those rare paths.
 */
function replay(request: Request, read: BodyRead): Request {
  let next = 0;
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const chunk = read.chunks[next];
      if (chunk !== undefined) {
        next += 1;
        controller.enqueue(chunk);
      } else if (read.failure) {
        controller.error(read.failure.error);
      } else {
        if (!read.reader) return controller.close();
        try {
          const { done, value } = await read.reader.read();
          if (done) controller.close();
          else controller.enqueue(value);
        } catch (error) {
          controller.error(error);
        }
      }
    },
    cancel: (reason) => read.reader?.cancel(reason).catch(() => undefined),
  });
  return new Request(request, { body, duplex: 'half' } as RequestInit & { duplex: 'half' });
}

/**
 * The longest body whose declared length is taken from the budget before its first byte (then read
 * whole, the fast way: readDeclared). A longer one is taken as its bytes arrive: a client that
 * declares 8 MiB and sends it a byte at a time (or never) holds what it sent, not 8 MiB for the
 * request timeout (five minutes), which let four users' slow uploads hold a replica's whole budget.
 * Calls are a few KiB; the largest code (256 KiB) and stdin, JSON-escaped, go the slower way.
 */
export const RESERVED_AHEAD_MAX_BYTES = 64 * 1024;

/**
 * Checks the request's body against the bounds above. `stall`: resolves if the body stops
 * arriving (body-progress.ts), which ends its reading with a 408.
 */
export async function checkBatch(
  request: Request,
  maxBatchSize: number,
  maxBodyBytes: number,
  reserve: ReserveBytes = () => undefined,
  stall?: Promise<BodyStall>,
): Promise<BatchCheck> {
  if (request.method.toUpperCase() !== 'POST' || !isJson(request.headers.get('content-type'))) return {};
  const declared = request.headers.get('content-length');
  if (Number(declared) > maxBodyBytes) return {};
  let read: BodyRead | undefined;
  if (declared !== null && /^\d+$/.test(declared) && Number(declared) <= RESERVED_AHEAD_MAX_BYTES) {
    // The whole declared length is taken before the first byte is read.
    const refusal = reserve(Number(declared));
    if (refusal) return refusal;
    read = await readDeclared(request, maxBodyBytes, stall);
  } else if (request.body !== null) read = await readBounded(request.body, maxBodyBytes, reserve, stall);
  if (!read) return {};
  if (read.refusal) return read.refusal;
  const shape = read.text === undefined ? undefined : jsonShapeProblem(read.text);
  if (shape) return { refused: jsonShapeRefused(shape), limit: 'json_shape' };
  // JSON.parse never yields undefined: undefined means empty, over-size, unreadable or not JSON.
  let body: unknown;
  try {
    body = read.text?.trim() ? JSON.parse(read.text) : undefined;
  } catch {
    body = undefined;
  }
  if (body === undefined) return { request: replay(request, read) };
  if (Array.isArray(body) && body.length > maxBatchSize) return { refused: batchTooLarge(body.length, maxBatchSize), limit: 'batch_size' };
  return { parsedBody: body };
}
