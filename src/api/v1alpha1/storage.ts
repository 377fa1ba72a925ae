// How big a SandboxRun is once stored, and how its status is made to fit. The API server stores
// custom resources as JSON (Go's encoding/json, which also escapes <, > and &), and etcd refuses a
// request above 1.5 MiB by default: a run whose final status does not fit is never recorded, so
// its run stays unfinished and is never deleted. The schema bounds every field; what JSON escaping
// or large metadata add on top is taken out of the stored outputs here, which are ours to cut.
import { boundMessages, finishedConditions } from './conditions.js';
import { isTerminalPhase, MAX_MESSAGE_LENGTH, MAX_OUTPUT_BYTES_HARD, type SandboxRunStatus } from './sandboxrun.js';

/** etcd's default --max-request-bytes: a larger object cannot be written at all. */
export const ETCD_REQUEST_LIMIT_BYTES = 1536 * 1024;
/**
 * What a run may grow to when we write its status. The rest of the etcd limit is margin for the
 * request's own framing (key, transaction), managedFields entries the API server adds, and a
 * later metadata write (the executor annotation, a finalizer someone adds).
 */
export const OBJECT_BUDGET_BYTES = 1280 * 1024;
/** Longest message kept in a status that had to be cut down to its minimum. */
const MINIMAL_MESSAGE_CHARS = 1024;

/** Bytes one UTF-16 code unit (or surrogate pair) takes in Go's JSON encoding. */
function charCost(code: number): number {
  if (code === 0x22 || code === 0x5c || code === 0x0a || code === 0x0d || code === 0x09) return 2;
  if (code < 0x20 || code === 0x3c || code === 0x3e || code === 0x26) return 6;
  if (code < 0x80) return 1;
  if (code < 0x800) return 2;
  if (code === 0x2028 || code === 0x2029) return 6;
  return 3; // BMP character; a lone surrogate becomes \ufffd (3 bytes) too
}

/**
 * Length of `s` as a JSON string (quotes included), as the API server writes it: the largest of
 * Go's encodings, so an estimate here is never below what etcd receives.
 */
export function jsonStringSize(s: string): number {
  let n = 2;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n += 4;
        i++;
        continue;
      }
    }
    n += charCost(c);
  }
  return n;
}

/** Serialized size of any JSON value under the same encoding. */
export function jsonSize(v: unknown): number {
  if (v === null || v === undefined) return 4;
  if (typeof v === 'string') return jsonStringSize(v);
  if (typeof v === 'number' || typeof v === 'boolean') return String(v).length;
  if (Array.isArray(v)) return 2 + v.reduce((n: number, x) => n + jsonSize(x) + 1, 0);
  if (typeof v === 'object') {
    let n = 2;
    for (const [k, x] of Object.entries(v)) if (x !== undefined) n += jsonStringSize(k) + 1 + jsonSize(x) + 1;
    return n;
  }
  return 0;
}

/** The longest prefix of `s`, cut at a character boundary, whose JSON form fits `maxJson` bytes. */
export function prefixWithinJson(s: string, maxJson: number): string {
  let n = 2;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const pair = c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && s.charCodeAt(i + 1) >= 0xdc00 && s.charCodeAt(i + 1) <= 0xdfff;
    const cost = pair ? 4 : charCost(c);
    if (n + cost > maxJson) return s.slice(0, i);
    n += cost;
    if (pair) i++;
  }
  return s;
}

/** The longest prefix of `s` of at most `maxBytes` UTF-8 bytes, cut at a character boundary. */
export function prefixWithinUtf8(s: string, maxBytes: number): string {
  if (s.length * 3 <= maxBytes || Buffer.byteLength(s, 'utf8') <= maxBytes) return s;
  const buf = Buffer.from(s, 'utf8');
  let end = Math.max(0, maxBytes);
  // Step back over continuation bytes (10xxxxxx) so no character is split.
  while (end > 0 && end < buf.length && (buf[end]! & 0xc0) === 0x80) end--;
  return buf.subarray(0, end).toString('utf8');
}

type StoredRun = { status?: SandboxRunStatus } & Record<string, unknown>;

/** Splits `room` JSON bytes between two texts: each gets half, and what one leaves goes to the other. */
function share(a: string, b: string, room: number): [string, string] {
  const sa = jsonStringSize(a);
  const sb = jsonStringSize(b);
  if (sa + sb <= room) return [a, b];
  const half = Math.floor(room / 2);
  if (sa <= half) return [a, prefixWithinJson(b, room - sa)];
  if (sb <= half) return [prefixWithinJson(a, room - sb), b];
  return [prefixWithinJson(a, half), prefixWithinJson(b, room - half)];
}

/**
 * The status to store for `run`: messages within their bound (boundMessages), outputs cut to
 * `capBytes` UTF-8 bytes each, then further, if
 * needed, so the whole object stays within `budget` bytes of JSON. `truncated` says so. When
 * even empty outputs do not fit (an object whose spec or metadata is already near the limit),
 * the result is minimalStatus(): the phase and why, nothing else.
 */
export function fitStatus(run: StoredRun, given: SandboxRunStatus, capBytes = MAX_OUTPUT_BYTES_HARD, budget = OBJECT_BUDGET_BYTES): SandboxRunStatus {
  const status = boundMessages(given);
  const cap = Math.min(capBytes, MAX_OUTPUT_BYTES_HARD);
  let stdout = prefixWithinUtf8(status.stdout ?? '', cap);
  let stderr = prefixWithinUtf8(status.stderr ?? '', cap);
  const without: SandboxRunStatus = { ...status, stdout: '', stderr: '', truncated: true };
  const fixed = jsonSize({ ...run, status: without }) - 4; // the two empty strings' quotes
  if (fixed > budget) return minimalStatus(status);
  [stdout, stderr] = share(stdout, stderr, budget - fixed);
  const cut = stdout.length !== (status.stdout ?? '').length || stderr.length !== (status.stderr ?? '').length;
  const out: SandboxRunStatus = { ...status };
  if (status.stdout !== undefined) out.stdout = stdout;
  if (status.stderr !== undefined) out.stderr = stderr;
  if (cut) out.truncated = true;
  return out;
}

/** An exit code any status keeps: a 32-bit integer (what a process or a kernel can report). */
const isInt32 = (n: unknown): n is number => Number.isInteger(n) && (n as number) >= -(2 ** 31) && (n as number) < 2 ** 32;

/**
 * The least a terminal status must say (phase, reason, a short message, completion time, and the
 * Complete and Ready conditions with that short message, so `kubectl wait --for=condition=Complete`
 * still ends): small enough to fit next to any object the API server accepted. Outputs and earlier
 * conditions are dropped (merge patch null removes the outputs from the stored object, and the
 * conditions list is replaced whole); an exit code is kept only when it is a 32-bit integer (it
 * came from the sandbox).
 */
export const NOT_STORED_TOO_LARGE = 'The output was not stored: the SandboxRun is too large.';
/** Why the output is missing when the API server refused the whole status for another reason. */
export const NOT_STORED_REFUSED = 'The output was not stored: the API server refused the full status.';

/** Whether `status` is a minimal one already (its outputs removed: nothing more to cut). */
export const isMinimalStatus = (status: SandboxRunStatus): boolean => (status as { stdout?: unknown }).stdout === null;

export function minimalStatus(status: SandboxRunStatus, note = NOT_STORED_TOO_LARGE): Record<string, unknown> & SandboxRunStatus {
  const short = (status.message ?? '').slice(0, Math.min(MINIMAL_MESSAGE_CHARS, MAX_MESSAGE_LENGTH));
  const message = short === '' ? note : `${short} ${note}`;
  const at = Date.parse(status.completionTime ?? '');
  const finished = isTerminalPhase(status.phase) && status.reason !== undefined && Number.isFinite(at);
  return {
    ...(status.phase !== undefined && { phase: status.phase }),
    ...(status.reason !== undefined && { reason: status.reason }),
    message,
    ...(status.completionTime !== undefined && { completionTime: status.completionTime }),
    ...(isInt32(status.exitCode) && { exitCode: status.exitCode }),
    ...(status.observedGeneration !== undefined && { observedGeneration: status.observedGeneration }),
    truncated: true,
    stdout: null,
    stderr: null,
    conditions: finished
      ? finishedConditions(undefined, { reason: status.reason as string, message, generation: status.observedGeneration }, new Date(at))
      : null,
  } as unknown as Record<string, unknown> & SandboxRunStatus;
}
