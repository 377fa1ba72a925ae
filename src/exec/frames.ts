// What a kernel may send (runtime/PROTOCOL.md), as schemas, and the bounds derived from them.
// Everything that comes out of a sandbox pod is untrusted: python and node session code runs
// inside the kernel process and can write frames of its own. A frame is accepted only if it has
// one of these shapes; texts are then cut again to the call's cap (capText), whatever the kernel
// claims, so a kernel can lie only about its own call's output, within the cap.
import { z } from 'zod';
import type { DisplayItem } from './display.js';
import { NETWORK_CHECK_SECONDS } from './runner.js';

/** A kernel error's `ename` is a type name: kept to this many characters. */
export const MAX_ENAME_CHARS = 200;
/**
 * UTF-8 bytes one character of a text can take in a frame's JSON: the Python kernel falls back
 * to ASCII escapes when a text holds a lone surrogate, and then a character outside the BMP (one
 * character for Python's cap) becomes two `\uXXXX` escapes.
 */
export const WORST_BYTES_PER_CHAR = 12;
/** Keys, numbers, ids and punctuation of a result frame, with room to spare. */
const FRAME_OVERHEAD_BYTES = 4096;
/** Frames that are no call's answer (pongs, strays): enough for any pong. */
export const IDLE_MAX_FRAME_BYTES = 64 * 1024;

/**
 * The largest frame a well-behaved kernel sends for a call with this cap: a result carries at
 * most stdout, stderr, result, evalue and traceback of `capChars` characters each (the kernels
 * cut each of them there) and an ename; an output frame carries less. 50,000 → about 3 MB.
 */
export function maxFrameBytes(capChars: number): number {
  return WORST_BYTES_PER_CHAR * (5 * capChars + MAX_ENAME_CHARS) + FRAME_OVERHEAD_BYTES;
}

/**
 * Characters (UTF-16 code units) a call may stream before the connection counts as breached:
 * the kernels stream at most `capChars` characters per stream (two streams), and a Python
 * character can be two code units. Four times that is slack, not a bound anyone reaches.
 */
export function streamBudgetChars(capChars: number): number {
  return 4 * 2 * 2 * capChars + 64 * 1024;
}

/**
 * The largest `output` frame a kernel sends for a text of `units` UTF-16 units: the text (JSON
 * takes at most 6 bytes for a unit: a control character's \u0001, half of \ud83d\ude00) and four
 * short keys. Bytes beyond it (keys the schema drops, whitespace) would be a parse on the gateway's
 * thread that no output budget counts: frames padded so kept it busy for every caller.
 */
export function maxOutputFrameBytes(units: number): number {
  return 256 + (WORST_BYTES_PER_CHAR / 2) * units;
}

/**
 * Output frames a kernel sends at most per second for one call: it flushes at most every 20 ms
 * (and sooner only for 16 Ki characters pending), one frame per stream, never an empty one.
 */
export const OUTPUT_FRAMES_PER_SECOND = 100;
/** Characters pending that make a kernel flush at once (runtime/PROTOCOL.md, `output`). */
const FLUSH_CHARS = 16 * 1024;

/**
 * Output and display frames one call may have brought `elapsedMs` after its request was sent,
 * before the connection counts as breached. A kernel sends at most: its flushes by time
 * (OUTPUT_FRAMES_PER_SECOND), its flushes by size until both streams reached the cap, and
 * `maxDisplayItems` items and a note; twice that and 64 are slack. Counting frames, not only
 * characters, bounds what a flood of tiny or empty frames costs the gateway (each is parsed and
 * checked): a hostile call's frames cost at most ~2 × 100 a second, however fast they come.
 */
export function frameBudget(capChars: number, maxDisplayItems: number, elapsedMs: number): number {
  const bySize = 2 * (Math.ceil((2 * capChars) / FLUSH_CHARS) + 2);
  const byTime = (OUTPUT_FRAMES_PER_SECOND * Math.max(0, elapsedMs)) / 1000;
  return Math.floor(2 * (bySize + maxDisplayItems + 1 + byTime)) + 64;
}

/**
 * A frame may reach the gateway in at most 16 chunks plus one per this many of its bytes. A kernel
 * writes each frame at once, and every stage on the way (pipe, shim, containerd, kubelet, API
 * server) forwards what it read, a page or a TLS record at a time: pieces of a big frame are KiBs.
 * A frame trickled a byte per write would cost the gateway a websocket message per byte.
 */
export const MIN_PIECE_BYTES = 256;

/**
 * Bytes the gateway may have written to a pod's stream that the pod has not taken yet (the
 * websocket's queue) when it answers a nested call. A kernel reads its stream all the time; one
 * whose program makes calls and leaves their answers unread stops reading (its reader waits on
 * that program), and a pod that writes call frames and reads nothing would pile the answers up
 * in the gateway. Far above a legitimate backlog: 32 pending results of 64 KiB (the default cut)
 * and a request.
 */
export const MAX_UNREAD_BYTES = 16 * 1024 * 1024;

/**
 * A busy answer or an error frame: an honest kernel's are a few hundred bytes and come before
 * anything of a call (busy: the call did not start; error: a request it could not read). Each is
 * followed by a fresh request (the call sent again, or read back over a new stream) with budgets
 * of its own, so one that is larger or comes after the call's output, display or tool calls is a
 * breach: otherwise a kernel could have the gateway parse every request's budgets over and over
 * for the whole of a caller's wait.
 */
export const MAX_RETRIED_ANSWER_BYTES = 4096;

/**
 * Objects and arrays a frame larger than a call frame may hold (MAX_CALL_FRAME_BYTES, the largest
 * frame of structured data a kernel sends: its tool calls' arguments): larger ones are texts (an
 * image in base64, a result's output) in a few objects. A large frame of containers would be a
 * parse of ~200 ms a MiB in one block on the gateway's thread.
 */
export const MAX_CONTAINERS_IN_LARGE_FRAME = 64;

/** Frames and bytes that answer no pending call, over a connection's life, before it is failed. */
export const UNSOLICITED_MAX_FRAMES = 16;
export const UNSOLICITED_MAX_BYTES = 64 * 1024;

/** Any text in a frame: bounded by the frame size anyway; this rejects absurd claims early. */
const text = z.string().max(maxFrameBytes(262_144));
const count = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);
const id = z.string().min(1).max(64);
/** null from a kernel means absent (sanitizeResult drops it). */
const optional = <T extends z.ZodType>(t: T): z.ZodOptional<z.ZodNullable<T>> => t.nullish();

export const PongFrameSchema = z.object({ id, type: z.literal('pong') });

export const OutputFrameSchema = z.object({ id, type: z.literal('output'), stream: z.enum(['stdout', 'stderr']), text });

export const KernelErrorSchema = z.object({ ename: text, evalue: text, traceback: text });

export const ResultFrameSchema = z.object({
  id,
  type: z.literal('result'),
  status: z.enum(['ok', 'error', 'timeout', 'lost']),
  stdout: text,
  stderr: text,
  stdoutBytes: count,
  stderrBytes: count,
  truncated: z.boolean(),
  result: optional(text),
  exitCode: optional(
    z
      .number()
      .int()
      .min(-(2 ** 31))
      .max(2 ** 32),
  ),
  error: optional(KernelErrorSchema),
  durationMs: z.number().finite().nonnegative().max(Number.MAX_SAFE_INTEGER),
  timedOut: optional(z.boolean()),
  oomKilled: optional(z.boolean()),
  processLimit: optional(z.boolean()),
  diskFull: optional(z.enum(['workspace', 'tmp'])),
  leftovers: optional(count),
  busy: optional(z.boolean()),
  notIsolated: optional(z.boolean()),
  notFound: optional(z.boolean()),
  proof: optional(z.string().max(64)),
});

/** The kernel says a request of ours was not a frame (a gateway bug, or a forged frame). */
export const ErrorFrameSchema = z.object({ type: z.literal('error'), message: text });

export const KernelFrameSchema = z.discriminatedUnion('type', [PongFrameSchema, OutputFrameSchema, ResultFrameSchema, ErrorFrameSchema]);

export type KernelFrame = z.output<typeof KernelFrameSchema>;
export type ResultFrame = z.output<typeof ResultFrameSchema>;

/**
 * Why a call the kernel refused for the network (notIsolated) did not run, in the gateway's own
 * words: the kernel's text is not repeated to the caller.
 */
export const NOT_ISOLATED_MESSAGE = `the sandbox pod could still reach the network ${NETWORK_CHECK_SECONDS} s after the call arrived (its NetworkPolicy is not enforced there yet), so the code was not run`;

/** Why a run did not start in a pod whose kernel refused to start for the network (kernelRefusedNetwork). */
export const NOT_ISOLATED_AT_START_MESSAGE =
  'the sandbox pod could still reach the network when its kernel started (its NetworkPolicy is not enforced there), so the kernel refused to start and the code was not run';

export interface KernelResult {
  status: 'ok' | 'error' | 'timeout' | 'lost';
  stdout: string;
  stderr: string;
  stdoutBytes: number;
  stderrBytes: number;
  truncated: boolean;
  result?: string;
  exitCode?: number;
  error?: { ename: string; evalue: string; traceback: string };
  durationMs: number;
  /** Only for "run": the deadline stopped the program. */
  timedOut?: boolean;
  /** Only for "run": the memory cgroup killed a process during the run. */
  oomKilled?: boolean;
  /** A fork failed at the sandbox's process cap during the call ("run" and "exec"). */
  processLimit?: boolean;
  /** A sandbox volume ("workspace" or "tmp") was full during or at the end of the call. */
  diskFull?: string;
  /** Only for "run": the program's processes still running when it ended (killed then). */
  leftovers?: number;
  /** Images, HTML and tables the call displayed (display.ts), checked and capped; absent: none. */
  display?: DisplayItem[];
  /**
   * The kernel refused the call because another one was running: the code did not start. Only on
   * an "error" result (sanitizeResult). A kernel's word like all its frames: see SessionTurns for
   * why believing it cannot make the gateway run code twice that the kernel did not have already.
   */
  busy?: true;
  /**
   * The kernel refused a call sent with `netcheck` because its pod could still reach the network:
   * the code did not start. Only on an "error" result. Believing a lying kernel only fails that
   * call (the pod's own code could as well have failed it).
   */
  notIsolated?: true;
  /**
   * The answer to a `recall` of a key the kernel never ran (runtime/PROTOCOL.md, "Recall"): it
   * knows nothing of that run. Only on an "error" result.
   */
  notFound?: true;
  /** In an answer to a recall: the proof the call was sent with (KernelExecRequest.proof), which the kernel kept. */
  proof?: string;
}

/**
 * Whether an answer to a call sent with `netcheck` shows the kernel ran its network check and
 * passed it: not when it refused for the network, nor when it answered busy, which it does before
 * the check (runtime server.py), so the call that runs next must carry the check again.
 */
export function passedNetcheck(r: Pick<KernelResult, 'busy' | 'notIsolated'>): boolean {
  return r.notIsolated !== true && r.busy !== true;
}

/**
 * The result as the gateway returns and stores it: every text cut to the call's cap (ename to
 * MAX_ENAME_CHARS), `truncated` set when the gateway cut anything, byte counts at least the
 * bytes of the text kept. What a kernel claims beyond that is not believed.
 */
export function sanitizeResult(f: ResultFrame, capChars: number): KernelResult {
  let cut = false;
  const cap = (s: string, max = capChars): string => {
    const c = capText(s, max);
    cut ||= c.cut;
    return c.cut ? copied(c.text) : c.text;
  };
  const stdout = cap(f.stdout);
  const stderr = cap(f.stderr);
  const out: KernelResult = {
    status: f.status,
    stdout,
    stderr,
    stdoutBytes: Math.max(f.stdoutBytes, Buffer.byteLength(stdout)),
    stderrBytes: Math.max(f.stderrBytes, Buffer.byteLength(stderr)),
    truncated: false,
    durationMs: Math.round(f.durationMs),
  };
  if (f.result != null) out.result = cap(f.result);
  if (f.exitCode != null) out.exitCode = f.exitCode;
  if (f.error != null) {
    // Error texts are not output: cutting them does not make the output truncated.
    const keep = cut;
    out.error = { ename: cap(f.error.ename, MAX_ENAME_CHARS), evalue: cap(f.error.evalue), traceback: cap(f.error.traceback) };
    cut = keep;
  }
  if (f.timedOut != null) out.timedOut = f.timedOut;
  if (f.oomKilled != null) out.oomKilled = f.oomKilled;
  if (f.processLimit != null) out.processLimit = f.processLimit;
  if (f.diskFull != null) out.diskFull = f.diskFull;
  if (f.leftovers != null) out.leftovers = f.leftovers;
  if (isBusyAnswer(f)) out.busy = true;
  if (f.notIsolated === true && f.status === 'error') out.notIsolated = true;
  if (f.notFound === true && f.status === 'error') out.notFound = true;
  if (f.proof != null) out.proof = f.proof;
  out.truncated = f.truncated || cut;
  return out;
}

/** A result saying the kernel was busy: the call did not start (runtime/PROTOCOL.md, KernelBusy). */
export function isBusyAnswer(f: Pick<ResultFrame, 'busy' | 'status'>): boolean {
  return f.busy === true && f.status === 'error';
}

/** The frame, or why it is not one (short, for an error message). */
export function parseKernelFrame(message: unknown): { ok: true; frame: KernelFrame } | { ok: false; why: string } {
  const r = KernelFrameSchema.safeParse(message);
  if (r.success) return { ok: true, frame: r.data };
  const issue = r.error.issues[0];
  const where = issue?.path.length ? ` at "${issue.path.map(String).join('.').slice(0, 40)}"` : '';
  return { ok: false, why: `not a kernel frame${where}: ${(issue?.message ?? 'invalid').slice(0, 120)}` };
}

/**
 * A text cut to `maxChars`, in a string of its own. V8 makes a cut (slice) of a long string a
 * view that keeps the whole string alive: a frame's text of ~3 MB cut to the cap would hold all of it
 * for as long as the call's result or display items are kept (10 display items: 33 MB held for
 * 0.5 MB kept, measured). A UTF-16 round trip copies the kept part exactly, lone surrogates too.
 */
export function cutText(text: string, maxChars: number): string {
  const c = capText(text, maxChars);
  return c.cut ? copied(c.text) : c.text;
}

const copied = (s: string): string => Buffer.from(s, 'utf16le').toString('utf16le');

/**
 * The first `maxChars` characters (code points, as the Python kernel counts them) of `s`, and
 * whether anything was cut. Never splits a surrogate pair.
 */
export function capText(s: string, maxChars: number): { text: string; cut: boolean; chars: number } {
  const max = Math.max(0, Math.floor(maxChars));
  if (s.length <= max) return { text: s, cut: false, chars: countChars(s) };
  let chars = 0;
  let i = 0;
  while (i < s.length && chars < max) {
    const c = s.charCodeAt(i);
    i += c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && isLow(s.charCodeAt(i + 1)) ? 2 : 1;
    chars++;
  }
  return { text: s.slice(0, i), cut: i < s.length, chars };
}

function isLow(c: number): boolean {
  return c >= 0xdc00 && c <= 0xdfff;
}

function countChars(s: string): number {
  let n = s.length;
  for (let i = 0; i + 1 < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && isLow(s.charCodeAt(i + 1))) {
      n--;
      i++;
    }
  }
  return n;
}
