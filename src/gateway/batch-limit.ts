// JSON-RPC batch cap (CODEMODE_MAX_BATCH_SIZE). 2025-03-26 clients may POST an array of messages;
// the MCP SDK's transport runs every tools/call in it concurrently and refuses only arrays over
// its own hard 100. A longer batch than ours is refused here, before anything of it reaches the
// transport, with HTTP 400 and a JSON-RPC error that states the limit. Anything else (not a
// POST, not JSON, too large, unparseable) goes to the SDK untouched, which answers it as before.

export interface BatchCheck {
  /** The answer to send instead of serving the request. */
  refused?: Response;
  /** The body, already parsed: handed to the SDK so it does not read it again. */
  parsedBody?: unknown;
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

/** Reads at most maxBytes of a body; undefined when it is longer (the SDK answers 413). */
async function readBounded(request: Request, maxBytes: number): Promise<string | undefined> {
  if (Number(request.headers.get('content-length')) > maxBytes || request.body === null) return undefined;
  const reader = request.body.getReader();
  const decoder = new TextDecoder();
  let received = 0;
  let text = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return text + decoder.decode();
    received += value.byteLength;
    if (received > maxBytes) {
      await reader.cancel().catch(() => undefined);
      return undefined;
    }
    text += decoder.decode(value, { stream: true });
  }
}

export async function checkBatch(request: Request, maxBatchSize: number, maxBodyBytes: number): Promise<BatchCheck> {
  if (request.method.toUpperCase() !== 'POST' || !isJson(request.headers.get('content-type'))) return {};
  let text: string | undefined;
  try {
    // A clone: the original stays readable for the SDK when we pass it through.
    text = await readBounded(request.clone(), maxBodyBytes);
  } catch {
    return {};
  }
  if (text === undefined || text.trim() === '') return {};
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return {};
  }
  if (Array.isArray(body) && body.length > maxBatchSize) return { refused: batchTooLarge(body.length, maxBatchSize) };
  return { parsedBody: body };
}
