// Nested tool calls on the kernel stream (runtime/PROTOCOL.md, "Tool calls"): what the kernel may
// send while an exec/run is pending, and what the gateway answers. The kernel side is untrusted
// (session code runs inside the kernel process and can write any frame): every field is checked
// here, and a frame that is not a valid call fails only that call when it can be answered at all.
import { z } from 'zod';

/** A call frame is at most this large (JSON bytes): arguments of a tool call, a search query. */
export const MAX_CALL_FRAME_BYTES = 1024 * 1024;
/** Nested calls of one request waiting for their answer at the same time. */
export const MAX_PENDING_CALLS = 32;
/**
 * Call frames of one request refused without an upstream call — by the stream itself (malformed,
 * no broker, too many pending) or by the broker (a server or tool the run may not use, past the
 * run's limits, arguments that do not fit) — before the rest count as strays: a well-behaved
 * program meets few of them, each a round trip of its own.
 */
export const MAX_REFUSED_CALLS = 1000;
/**
 * Refused calls a request may add per second on top of MAX_REFUSED_CALLS: more than a program
 * that retries a refused call in a loop gets answered (each waits for its answer), far fewer than
 * frames written straight into the stream, which would keep the gateway answering them.
 */
export const REFUSED_CALLS_PER_SECOND = 1000;

/**
 * Bytes of call frames (accepted or refused) one request may send: every one is parsed and checked
 * on the gateway's thread (~25 ms a MiB of many-keyed arguments on the test machine, JSON.parse's; the
 * checks add next to nothing: see `args`), so past
 * this much, plus CALL_FRAME_BYTES_PER_SECOND, the stream is failed. A program's tool arguments
 * rarely add up to a MiB; frames written straight into the stream would keep the gateway busy.
 */
export const CALL_FRAME_BYTES = 16 * 1024 * 1024;
export const CALL_FRAME_BYTES_PER_SECOND = 4 * 1024 * 1024;

/** Call frame bytes a request may have sent `elapsedMs` after it was sent (see CALL_FRAME_BYTES). */
export function callFrameByteBudget(elapsedMs: number): number {
  return CALL_FRAME_BYTES + Math.floor((CALL_FRAME_BYTES_PER_SECOND * Math.max(0, elapsedMs)) / 1000);
}

/** Refused call frames a request may have `elapsedMs` after it was sent (see MAX_REFUSED_CALLS). */
export function refusedCallBudget(elapsedMs: number): number {
  return MAX_REFUSED_CALLS + Math.floor((REFUSED_CALLS_PER_SECOND * Math.max(0, elapsedMs)) / 1000);
}

/** Failures the broker answers without calling an upstream: they count as refused calls. */
export const REFUSAL_KINDS: ReadonlySet<FailureKind> = new Set(['denied', 'limit', 'invalid']);
/** Upstream server names are Kubernetes object names. */
export const SERVER_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
/** MCP tool names (SEP-986): letters, digits, `_`, `-`, `.`, `/`; 1 to 128 characters. */
export const TOOL_NAME = /^[A-Za-z0-9_./-]{1,128}$/;
export const CALL_ID = /^[A-Za-z0-9_.-]{1,64}$/;
export const DETAILS = ['name', 'summary', 'full'] as const;
export type Detail = (typeof DETAILS)[number];

const server = z.string().max(253).regex(SERVER_NAME, { error: 'server must be an upstream server name (lowercase letters, digits and -)' });
const tool = z.string().regex(TOOL_NAME, { error: 'tool must be a tool name (letters, digits, _ . / -, at most 128)' });
const head = { id: z.string().min(1).max(64), type: z.literal('call'), callId: z.string().regex(CALL_ID) };
/**
 * A call's arguments: an object, passed on as parsed. Not `z.record(z.string(), z.unknown())`,
 * which checks every key and copies the object: twice JSON.parse's time for many-keyed arguments
 * (~60 ms a MiB on the test machine), on the gateway's thread, for frames the sandbox writes. The
 * keys of a parsed JSON object are strings already; the values are checked by checkArgs and the
 * upstream.
 */
const args = z
  .custom<Record<string, unknown>>((v) => typeof v === 'object' && v !== null && !Array.isArray(v), {
    error: 'args must be an object of argument names to values',
  })
  .default(() => ({}));

export const CallFrameSchema = z.discriminatedUnion('op', [
  z.object({ ...head, op: z.literal('call'), server, tool, args }),
  z.object({ ...head, op: z.literal('servers') }),
  z.object({
    ...head,
    op: z.literal('search'),
    query: z.string().min(1).max(1000),
    limit: z.int().min(1).max(50).default(10),
    detail: z.enum(DETAILS).default('summary'),
  }),
  z.object({ ...head, op: z.literal('describe'), server, tool: tool.optional(), detail: z.enum(DETAILS).default('full') }),
]);
export type CallFrame = z.output<typeof CallFrameSchema>;

/** Why a nested call failed, as the sandbox sees it (the codemode module's ToolError.kind). */
export const FAILURE_KINDS = ['tool', 'denied', 'limit', 'timeout', 'invalid', 'unavailable'] as const;
export type FailureKind = (typeof FAILURE_KINDS)[number];

/** The body of a callResult (id and callId are added when it is sent). */
export type CallAnswer = { ok: true; value: unknown; cut?: string } | { ok: false; error: { kind: FailureKind; message: string } };

export function failure(kind: FailureKind, message: string): CallAnswer {
  return { ok: false, error: { kind, message } };
}

/** Is this message a call frame at all (so a bad one is this call's failure, not a stream breach)? */
export function looksLikeCall(message: unknown): message is { type: 'call'; id?: unknown; callId?: unknown } {
  return typeof message === 'object' && message !== null && (message as { type?: unknown }).type === 'call';
}

export type ParsedCall =
  | { ok: true; frame: CallFrame }
  /** `callId` set: answer that call with the error; unset: nothing can be answered (a stray). */
  | { ok: false; id?: string; callId?: string; why: string };

/** Checks a frame with type "call". Never throws. */
export function parseCallFrame(message: { id?: unknown; callId?: unknown }, bytes: number): ParsedCall {
  const id = typeof message.id === 'string' && message.id.length <= 64 ? message.id : undefined;
  const callId = typeof message.callId === 'string' && CALL_ID.test(message.callId) ? message.callId : undefined;
  const addr = { ...(id !== undefined && { id }), ...(callId !== undefined && { callId }) };
  if (bytes > MAX_CALL_FRAME_BYTES)
    return { ok: false, ...addr, why: `the call frame is ${bytes} bytes; the limit is ${MAX_CALL_FRAME_BYTES} (send smaller arguments)` };
  const r = CallFrameSchema.safeParse(message);
  if (r.success) return { ok: true, frame: r.data };
  const issue = r.error.issues[0];
  const where = issue?.path.length ? ` (${issue.path.map(String).join('.').slice(0, 40)})` : '';
  return { ok: false, ...addr, why: `not a valid tool call${where}: ${(issue?.message ?? 'invalid').slice(0, 160)}` };
}
