// The shape of a request body, looked at before it is parsed. Every request of this gateway is a
// few dozen JSON values (an envelope, a tool's flat arguments, the client's _meta); its size comes
// from strings (code, stdin, file content). A body of the same 8 MiB made of hundreds of thousands
// of object members is another matter: JSON.parse and then the SDK's zod schemas (every unknown
// key of params, arguments and _meta is visited, at a cost that grows faster than the count) held
// the event loop for seconds per request (measured: 3.5 s for 500,000 members in _meta), so one
// caller's requests stalled every other caller of the replica. Such a body is refused unparsed.

/** JSON values (object members and array items, counted by separators and openings) one body may hold. */
export const MAX_JSON_VALUES = 2048;
/** Objects and arrays nested in one another, at most. */
export const MAX_JSON_DEPTH = 64;

export interface JsonShapeLimits {
  maxValues: number;
  maxDepth: number;
}

export type JsonShapeProblem = { kind: 'values'; max: number } | { kind: 'depth'; max: number };

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const COMMA = 0x2c;

/**
 * Pure: whether `text` holds more JSON values or nests deeper than `limits` allow, or undefined.
 * Strings are skipped with indexOf (a large string costs a scan of its bytes, nothing per
 * character in JavaScript), and the walk stops at the first value over the limit, so its cost is
 * bounded by the limits, not by the body. Not a validator: text that is not JSON passes, for
 * JSON.parse to refuse.
 */
export function jsonShapeProblem(
  text: string,
  limits: JsonShapeLimits = { maxValues: MAX_JSON_VALUES, maxDepth: MAX_JSON_DEPTH },
): JsonShapeProblem | undefined {
  let values = 0;
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      const end = stringEnd(text, i);
      if (end < 0) return undefined;
      i = end;
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > limits.maxDepth) return { kind: 'depth', max: limits.maxDepth };
      if (++values > limits.maxValues) return { kind: 'values', max: limits.maxValues };
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth--;
    } else if (c === COMMA) {
      if (++values > limits.maxValues) return { kind: 'values', max: limits.maxValues };
    }
  }
  return undefined;
}

/** The index of the quote that ends the string opened at `open`, or -1 when it never ends. */
function stringEnd(text: string, open: number): number {
  let from = open + 1;
  for (;;) {
    const q = text.indexOf('"', from);
    if (q < 0) return -1;
    // Escaped when an odd number of backslashes stands before it.
    let b = q - 1;
    while (b > open && text.charCodeAt(b) === BACKSLASH) b--;
    if ((q - 1 - b) % 2 === 0) return q;
    from = q + 1;
  }
}

/** The JSON-RPC error for a body of too many values or too deep (id null: nothing of it was read as a message). */
export function jsonShapeRefused(problem: JsonShapeProblem): Response {
  const what =
    problem.kind === 'values'
      ? `holds more than ${problem.max} JSON values (object members and array items)`
      : `nests objects and arrays more than ${problem.max} levels deep`;
  const message = `Invalid Request: this request body ${what}, more than any request to this gateway needs. Nothing in it was run. Send the call's arguments only (large data belongs in strings such as code, stdin or a file's content).`;
  return Response.json(
    { jsonrpc: '2.0', error: { code: -32600, message, data: { limit: `json_${problem.kind}`, max: problem.max } }, id: null },
    { status: 400 },
  );
}
