// The gateway's end of one kernel stream, without the websocket: requests out, frames in. Kept
// apart from the exec wiring (kernel.ts) so the data path can be fed bytes directly in tests.
//
// Everything a pod writes is untrusted (frames.ts). receive() never throws: client-node calls
// our stdout Writable straight from the websocket's onmessage, where a throw ends the process.
// A stream that breaks the protocol (not a frame, a frame of the wrong shape or size, output or
// stray frames beyond their budgets) is failed: its pending calls are rejected with
// KernelProtocolError, and nothing outside this stream is touched.
import { FrameDecoder, encodeFrame, type DecodedFrame } from './framing.js';
import {
  IDLE_MAX_FRAME_BYTES,
  MAX_CONTAINERS_IN_LARGE_FRAME,
  MAX_RETRIED_ANSWER_BYTES,
  MAX_UNREAD_BYTES,
  MIN_PIECE_BYTES,
  OUTPUT_FRAMES_PER_SECOND,
  UNSOLICITED_MAX_BYTES,
  UNSOLICITED_MAX_FRAMES,
  capText,
  frameBudget,
  isBusyAnswer,
  maxFrameBytes,
  maxOutputFrameBytes,
  parseKernelFrame,
  sanitizeResult,
  streamBudgetChars,
  type KernelFrame,
  type KernelResult,
} from './frames.js';
import {
  MAX_CALL_FRAME_BYTES,
  MAX_PENDING_CALLS,
  REFUSAL_KINDS,
  failure,
  looksLikeCall,
  parseCallFrame,
  callFrameByteBudget,
  refusedCallBudget,
  type CallAnswer,
  type CallFrame,
  type FailureKind,
} from '../codemode/frames.js';
import {
  DEFAULT_DISPLAY_LIMITS,
  acceptDisplay,
  displayByteBudget,
  displayFrameBudget,
  displayFrameBytes,
  finishDisplay,
  newTally,
  type DisplayLimits,
  type DisplayTally,
} from './display.js';

export type OutputListener = (stream: 'stdout' | 'stderr', text: string) => void;
/** Answers a nested tool call of the running code (src/codemode). Must not reject. */
export type CallHandler = (frame: CallFrame) => Promise<CallAnswer>;

/** The connection was lost: the call's outcome is unknown, the session may be gone. */
export class KernelConnectionError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'KernelConnectionError';
  }
}

/**
 * The exec stream could not even be opened because the API server (or the network to it) did not
 * answer: nothing reached the kernel, and whether it is alive cannot be told from here.
 */
export class KernelUnreachableError extends KernelConnectionError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'KernelUnreachableError';
  }
}

/**
 * The kernel did not answer a request within its time (the stream is then closed). For a Node
 * kernel this is also what a busy one looks like: it reads nothing, not even a ping, while
 * synchronous code runs.
 */
export class KernelNoAnswerError extends KernelConnectionError {
  constructor(message: string) {
    super(message);
    this.name = 'KernelNoAnswerError';
  }
}

/** The pod sent something the protocol does not allow; its stream was closed. */
export class KernelProtocolError extends KernelConnectionError {
  constructor(readonly breach: string) {
    super(`the sandbox broke the kernel protocol: ${breach}`);
    this.name = 'KernelProtocolError';
  }
}

interface Pending {
  expects: 'pong' | 'result';
  capChars: number;
  /** UTF-16 code units streamed so far, kept or not. */
  streamed: number;
  /** Characters each stream may still pass to onOutput. */
  room: { stdout: number; stderr: number };
  resolve(r: KernelResult | undefined): void;
  reject(e: Error): void;
  onOutput?: OutputListener;
  onCall?: CallHandler;
  /** callIds of this request's nested calls waiting for their answer. */
  calls: Set<string>;
  /** Call frames of this request refused without an upstream call (bounded: refusedCallBudget). */
  refused: number;
  /** Bytes of this request's call frames so far (bounded: callFrameByteBudget). */
  callBytes: number;
  /** Images, HTML and tables the call displayed so far (display.ts), capped as they arrive. */
  display: DisplayTally;
  /** Display frames of this request so far, and their bytes (displayFrameBudget, displayByteBudget). */
  displayFrames: number;
  displayBytes: number;
  /** When the request was written (`now()`), and its output and display frames since (frameBudget). */
  sentAt: number;
  frames: number;
  timer: NodeJS.Timeout;
}

/** Whether the kernel has sent anything of this call besides its final answer (it had started). */
function answered(p: Pending): boolean {
  return p.frames > 0 || p.displayFrames > 0 || p.callBytes > 0;
}

export class KernelStream {
  private readonly pending = new Map<string, Pending>();
  private readonly decoder = new FrameDecoder(IDLE_MAX_FRAME_BYTES, MIN_PIECE_BYTES, {
    aboveBytes: MAX_CALL_FRAME_BYTES,
    maxContainers: MAX_CONTAINERS_IN_LARGE_FRAME,
  });
  private nextId = 1;
  private closedReason: string | undefined;
  private breachReason: string | undefined;
  private unsolicited = { frames: 0, bytes: 0 };

  /**
   * `write` sends bytes to the kernel; `close` ends the transport (called once, on failure); `now`
   * is the clock (ms) a call's frame budget grows with; `unread` the bytes written and not yet
   * taken by the pod (the transport's queue: MAX_UNREAD_BYTES).
   */
  constructor(
    private readonly write: (frame: Buffer) => void,
    private readonly close: () => void,
    private readonly displayLimits: DisplayLimits = DEFAULT_DISPLAY_LIMITS,
    private readonly now: () => number = () => performance.now(),
    private readonly unread: () => number = () => 0,
  ) {}

  get closed(): boolean {
    return this.closedReason !== undefined;
  }

  /** Why the stream was failed as a protocol breach, if it was. */
  get breach(): string | undefined {
    return this.breachReason;
  }

  /** The error for a call on this closed stream. */
  closedError(): KernelConnectionError {
    if (this.breachReason !== undefined) return new KernelProtocolError(this.breachReason);
    return new KernelConnectionError(`Kernel connection is closed: ${this.closedReason ?? 'unknown reason'}`);
  }

  /** Sends a request; resolves with its pong (undefined) or its sanitized result. */
  request(
    message: Record<string, unknown>,
    expects: 'pong' | 'result',
    capChars: number,
    timeoutMs: number,
    onOutput?: OutputListener,
    onCall?: CallHandler,
  ): Promise<KernelResult | undefined> {
    if (this.closedReason !== undefined) return Promise.reject(this.closedError());
    const id = String(this.nextId++);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new KernelNoAnswerError(`The session kernel did not answer within ${timeoutMs} ms`));
        // A kernel that misses its own deadline is stuck; this stream can't be trusted any more.
        this.fail('a call did not answer in time');
      }, timeoutMs);
      this.pending.set(id, {
        expects,
        capChars,
        streamed: 0,
        room: { stdout: capChars, stderr: capChars },
        resolve,
        reject,
        timer,
        calls: new Set(),
        refused: 0,
        callBytes: 0,
        display: newTally(),
        displayFrames: 0,
        displayBytes: 0,
        sentAt: this.now(),
        frames: 0,
        ...(onOutput && { onOutput }),
        ...(onCall && { onCall }),
      });
      this.updateFrameLimit();
      // The kernel caps display items too (runtime/PROTOCOL.md, "Display"); we check them again.
      const caps =
        expects === 'result'
          ? {
              displayMaxImageBytes: this.displayLimits.maxImageBytes,
              displayMaxBytes: this.displayLimits.maxBytes,
              displayMaxItems: this.displayLimits.maxItems,
            }
          : {};
      try {
        this.write(encodeFrame({ ...message, ...caps, id }));
      } catch (err) {
        this.fail(`cannot write to the exec stream: ${err instanceof Error ? err.message : String(err)}`);
      }
    });
  }

  /** Bytes from the pod. Never throws; a breach fails this stream only. */
  receive(chunk: Buffer): void {
    if (this.closedReason !== undefined) return;
    try {
      let frames: DecodedFrame[];
      try {
        frames = this.decoder.pushSized(chunk);
      } catch (err) {
        this.fail(err instanceof Error ? err.message : String(err), true);
        return;
      }
      for (const f of frames) {
        if (this.closedReason !== undefined) return;
        this.onFrame(f.message, f.bytes);
      }
    } catch (err) {
      // A bug of ours, not the pod's: still, only this stream pays for it.
      this.fail(`the gateway failed to read the stream: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  /** Rejects every pending call and closes the transport; idempotent. */
  fail(reason: string, breach = false): void {
    if (this.closedReason !== undefined) return;
    this.closedReason = reason;
    if (breach) this.breachReason = reason;
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      p.reject(breach ? new KernelProtocolError(reason) : new KernelConnectionError(`Lost the connection to the session kernel: ${reason}`));
      this.pending.delete(id);
    }
    try {
      this.close();
    } catch {
      // already closed
    }
  }

  private onFrame(message: unknown, bytes: number): void {
    if (looksLikeCall(message)) return this.onCallFrame(message, bytes);
    if (isDisplayFrame(message)) return this.onDisplayFrame(message, bytes);
    const parsed = parseKernelFrame(message);
    if (!parsed.ok) return this.fail(parsed.why, true);
    const frame: KernelFrame = parsed.frame;
    if (frame.type === 'error') {
      const heard = [...this.pending.values()].some(answered);
      if (bytes > MAX_RETRIED_ANSWER_BYTES || heard)
        return this.fail(`the kernel sent an error frame of ${bytes} bytes${heard ? " after a call's output" : ''} (MAX_RETRIED_ANSWER_BYTES)`, true);
      return this.fail(`the kernel rejected the stream: ${capText(frame.message, 200).text}`);
    }
    const p = this.pending.get(frame.id);
    if (!p) return this.onUnsolicited(bytes);
    if (frame.type === 'result' && isBusyAnswer(frame) && (bytes > MAX_RETRIED_ANSWER_BYTES || answered(p)))
      return this.fail(`the kernel answered busy in ${bytes} bytes${answered(p) ? ' after the call had started' : ''} (MAX_RETRIED_ANSWER_BYTES)`, true);
    if (frame.type === 'output') {
      if (p.expects !== 'result') return this.fail('an output frame answered a ping', true);
      if (!this.countFrame(p)) return;
      if (bytes > maxOutputFrameBytes(frame.text.length))
        return this.fail(`an output frame of ${bytes} bytes carried only ${frame.text.length} characters of text`, true);
      p.streamed += frame.text.length;
      const budget = streamBudgetChars(p.capChars);
      if (p.streamed > budget) return this.fail(`a call streamed more than ${budget} characters of output (the cap is ${p.capChars} per stream)`, true);
      const kept = capText(frame.text, p.room[frame.stream]);
      p.room[frame.stream] -= kept.chars;
      if (kept.text) this.notify(p, frame.stream, kept.text);
      return;
    }
    if (frame.type !== p.expects) return this.fail(`a ${frame.type} frame answered a ${p.expects === 'pong' ? 'ping' : 'call'}`, true);
    clearTimeout(p.timer);
    this.pending.delete(frame.id);
    this.updateFrameLimit();
    if (frame.type !== 'result') return p.resolve(undefined);
    const result = sanitizeResult(frame, p.capChars);
    const display = finishDisplay(p.display, this.displayLimits);
    p.resolve(display.length > 0 ? { ...result, display } : result);
  }

  /** An image, HTML or table of the running call: a bad one becomes a note; only too many frames or bytes breach. */
  private onDisplayFrame(message: { id: string }, bytes: number): void {
    const p = this.pending.get(message.id);
    if (!p || p.expects !== 'result') return this.onUnsolicited(bytes);
    if (!this.countFrame(p)) return;
    const frames = displayFrameBudget(this.displayLimits);
    if (++p.displayFrames > frames)
      return this.fail(`a call sent more than ${frames} display frames (a kernel sends at most ${this.displayLimits.maxItems} items and a note)`, true);
    p.displayBytes += bytes;
    const budget = displayByteBudget(this.displayLimits, p.capChars);
    if (p.displayBytes > budget)
      return this.fail(`a call sent more than ${budget} bytes of display frames (more than its display caps let a kernel send)`, true);
    acceptDisplay(message, p.display, this.displayLimits, p.capChars);
  }

  /** Counts an output or display frame of `p`: false, and the stream failed, past frameBudget. */
  private countFrame(p: Pending): boolean {
    const elapsedMs = this.now() - p.sentAt;
    const budget = frameBudget(p.capChars, this.displayLimits.maxItems, elapsedMs);
    if (++p.frames <= budget) return true;
    this.fail(
      `a call sent more than ${budget} output and display frames in ${(elapsedMs / 1000).toFixed(1)} s (a kernel sends at most ${OUTPUT_FRAMES_PER_SECOND} a second)`,
      true,
    );
    return false;
  }

  /**
   * A nested tool call from the running code (runtime/PROTOCOL.md, "Tool calls"). A bad call is
   * answered as that call's failure; only a frame no call can be named for counts as a stray.
   */
  private onCallFrame(message: { id?: unknown; callId?: unknown }, bytes: number): void {
    const parsed = parseCallFrame(message, bytes);
    const id = parsed.ok ? parsed.frame.id : parsed.id;
    const callId = parsed.ok ? parsed.frame.callId : parsed.callId;
    const p = id === undefined ? undefined : this.pending.get(id);
    if (id === undefined || callId === undefined || !p || p.expects !== 'result' || p.calls.has(callId)) return this.onUnsolicited(bytes);
    const elapsedMs = this.now() - p.sentAt;
    p.callBytes += bytes;
    const byteBudget = callFrameByteBudget(elapsedMs);
    if (p.callBytes > byteBudget) return this.fail(`a call sent more than ${byteBudget} bytes of tool call frames in ${(elapsedMs / 1000).toFixed(1)} s`, true);
    // Refused calls (by the stream or the broker) are answered up to a budget, then count as strays.
    if (p.refused >= refusedCallBudget(elapsedMs)) return this.onUnsolicited(bytes);
    const refuse = (kind: FailureKind, message: string): void => {
      p.refused++;
      this.answerCall(id, callId, failure(kind, message));
    };
    if (!parsed.ok) return refuse('invalid', parsed.why);
    if (!p.onCall)
      return refuse(
        'unavailable',
        'tool calls are not available here: no upstream MCP servers are configured for this gateway, or this kind of run cannot reach them',
      );
    if (p.calls.size >= MAX_PENDING_CALLS)
      return refuse('limit', `more than ${MAX_PENDING_CALLS} tool calls are waiting at once; wait for some before starting more`);
    p.calls.add(callId);
    p.onCall(parsed.frame)
      .catch((err: unknown) => failure('unavailable', `the gateway failed the call: ${err instanceof Error ? err.message : String(err)}`))
      .then((answer) => {
        p.calls.delete(callId);
        if (!answer.ok && REFUSAL_KINDS.has(answer.error.kind)) p.refused++;
        // The request may have finished meanwhile: its code no longer waits for this answer.
        if (this.pending.get(id) === p) this.answerCall(id, callId, answer);
      })
      .catch(() => undefined);
  }

  private answerCall(id: string, callId: string, answer: CallAnswer): void {
    if (this.closedReason !== undefined) return;
    // A pod that sends calls and does not read their answers would pile them up in this process.
    const unread = this.unread();
    if (unread > MAX_UNREAD_BYTES) return this.fail(`the sandbox left ${unread} bytes of answers unread (at most ${MAX_UNREAD_BYTES})`, true);
    try {
      this.write(encodeFrame({ op: 'callResult', id, callId, ...answer }));
    } catch (err) {
      this.fail(`cannot write to the exec stream: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  /** Frames for no pending call: a finished or unknown id. A small budget, then a breach. */
  private onUnsolicited(bytes: number): void {
    this.unsolicited.frames++;
    this.unsolicited.bytes += bytes;
    if (this.unsolicited.frames > UNSOLICITED_MAX_FRAMES || this.unsolicited.bytes > UNSOLICITED_MAX_BYTES) {
      this.fail(`more than ${UNSOLICITED_MAX_FRAMES} frames or ${UNSOLICITED_MAX_BYTES} bytes answered no call`, true);
    }
  }

  private notify(p: Pending, stream: 'stdout' | 'stderr', text: string): void {
    try {
      p.onOutput?.(stream, text);
    } catch {
      // A listener's failure (e.g. a client that went away) must not end the call or the stream.
    }
  }

  /** The largest frame a legitimate kernel may send now: the biggest pending call's, else a pong's. */
  private updateFrameLimit(): void {
    let max = IDLE_MAX_FRAME_BYTES;
    for (const p of this.pending.values()) {
      if (p.expects === 'result') max = Math.max(max, maxFrameBytes(p.capChars), displayFrameBytes(this.displayLimits));
      // A call frame above its bound fails that call (parseCallFrame); only far above, the stream.
      if (p.onCall) max = Math.max(max, MAX_CALL_FRAME_BYTES + 64 * 1024);
    }
    this.decoder.maxFrameBytes = max;
  }
}

function isDisplayFrame(m: unknown): m is { id: string; type: 'display' } {
  return typeof m === 'object' && m !== null && (m as { type?: unknown }).type === 'display' && typeof (m as { id?: unknown }).id === 'string';
}
