// Reading a call's result back from its kernel after the client lost it (runtime/PROTOCOL.md,
// "Recall"): the exec stream broke mid-call, or the replica that sent it stopped. The kernel runs
// the code to its end all the same and keeps the results of its last keyed calls; a new stream asks
// for it. Shared by transient runs (src/runs/in-pod.ts) and session calls (src/sessions). Nothing
// here ever starts code.
import type { KernelResult } from './frames.js';
import { KernelConnectionError, KernelProtocolError, type CallHandler, type KernelConnection } from './kernel.js';

/**
 * How long past a call's timeout a call whose stream broke is still asked for its outcome: the
 * kernel ends the code at the timeout (or gives up 2 s later) and keeps the result; this covers
 * reaching it again (an API server or kubelet coming back).
 */
export const RECALL_AFTER_BREAK_GRACE_MS = 30_000;
/** What came of a stream that broke mid-call: the outcome read back (recalled), or nothing could tell (unknown). */
export const STREAM_BREAK_OUTCOMES = ['recalled', 'unknown'] as const;
export type StreamBreakOutcome = (typeof STREAM_BREAK_OUTCOMES)[number];

/**
 * Between attempts to reach a kernel again after its stream broke: 1 s, doubled after each
 * attempt up to 4 s. An outage is caught within a few seconds of its end, and sandbox code that
 * kills every new relay (its own uid may signal it) makes one exec every 4 s, not every second.
 */
const RECALL_RETRY_MS = 1_000;
const RECALL_RETRY_GROWTH = 4;

/**
 * Whether a kernel's answer to a recall holds no outcome: it keeps no result under that key
 * (notFound), too many recalls already wait for it (busy), or it is a kernel of a version before
 * recall (it refuses the op as a ProtocolError). Anything else is the call's result.
 */
export function recalledNothing(r: Pick<KernelResult, 'status' | 'notFound' | 'busy' | 'error'>): boolean {
  return r.notFound === true || r.busy === true || (r.status === 'error' && r.error?.ename === 'ProtocolError');
}

export interface RecallTarget {
  /** A stream to the kernel (a new one when the last broke). */
  connect(): Promise<KernelConnection>;
  /** The key the call was sent with. */
  key: string;
  capChars: number;
  /** Whether the pod is known to have stopped (then its kernel is gone): no more attempts. */
  stopped(): boolean | Promise<boolean>;
  /**
   * The call's tool-call handler, when this replica still serves the call: the code's tool calls
   * go on over the recall's stream (those on their way when the stream broke fail as unknown).
   */
  onCall?: CallHandler;
}

/** One recall: the result, or why there is none (`unreachable`: the kernel may answer later). */
export async function recallOnce(t: RecallTarget, timeoutMs: number): Promise<{ result: KernelResult } | { nothing: 'none' | 'unreachable' }> {
  try {
    const conn = await t.connect();
    const r = await conn.recall(t.key, t.capChars, timeoutMs, t.onCall);
    return recalledNothing(r) ? { nothing: 'none' } : { result: r };
  } catch (err) {
    if (!(err instanceof KernelConnectionError)) throw err;
    // A pod that broke the protocol gets no second stream; a stopped one has no kernel to ask.
    return { nothing: err instanceof KernelProtocolError || (await t.stopped()) ? 'none' : 'unreachable' };
  }
}

/**
 * recallOnce(), tried again while the kernel cannot be reached and its pod still runs, until
 * `until` (performance.now()), `retryMs` apart at first, then up to 4 × that: after a stream
 * broke, a new one needs the API server and the kubelet that may have broken it. Undefined when
 * the kernel cannot tell.
 */
export async function recallAfterBreak(t: RecallTarget, until: number, retryMs = RECALL_RETRY_MS): Promise<KernelResult | undefined> {
  for (let delay = retryMs; ; delay = Math.min(delay * 2, retryMs * RECALL_RETRY_GROWTH)) {
    const left = until - performance.now();
    if (left <= 0 || (await t.stopped())) return undefined;
    const r = await recallOnce(t, left);
    if ('result' in r) return r.result;
    if (r.nothing === 'none') return undefined;
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
}
