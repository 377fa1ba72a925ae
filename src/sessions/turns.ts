// A session's kernel runs one call at a time and answers a call that arrives meanwhile at once,
// marked busy: that call did not start (runtime/PROTOCOL.md). Here a call that finds its session
// busy waits for its turn instead of failing. Calls of this replica to one session queue in arrival
// order (p-queue, one at a time) and only the first of them asks the kernel again, after a pause
// that grows to MAX_PAUSE_MS: a session busy for a long time costs a few small frames a second,
// however many calls wait. Calls from other replicas are only seen as "busy", so across replicas
// the order is whoever asks first after the running call ended.
//
// Bounded three ways: the caller's deadline, its signal (checked only while it waits: a call that
// reached the kernel is never abandoned), and how many calls may wait per session here.
//
// Believing "busy" cannot make code run twice that the kernel did not have already: an honest
// kernel says busy only before it starts a call, in a few hundred bytes. A busy answer after any
// output, display or tool call of the call, or larger than MAX_RETRIED_ANSWER_BYTES, breaks the
// stream (src/exec/kernel-stream.ts). A kernel process that the session's own code has taken over
// could still say busy at once after running the call silently, and be sent the same code again —
// code it already holds and could run as often as it likes. The deadline ends that too.
import PQueue from 'p-queue';
import { setTimeout as sleep } from 'node:timers/promises';

/** The first pause before a busy session is asked again; it doubles up to MAX_PAUSE_MS. */
export const FIRST_PAUSE_MS = 10;
export const MAX_PAUSE_MS = 200;

/** How a call's wait for a busy session ended (a metric label: a closed set). */
export const WAIT_RESULTS = ['ran', 'deadline', 'full', 'aborted'] as const;
export type WaitResult = (typeof WAIT_RESULTS)[number];

/** Why a call gave up its turn without running. */
export type GaveUp = Exclude<WaitResult, 'ran'>;

/**
 * `waitedMs`: how long the call waited because the session was busy — queued behind a call of
 * this replica or answered busy — until its code went to the kernel or it gave up; undefined when
 * it found the session free.
 */
export type TurnResult<T> = ({ ran: T } | { gaveUp: GaveUp }) & { waitedMs?: number };

/** How long a call may wait for its turn, and who hears of it. */
export interface TurnWait {
  /** Until when (ms since the epoch). */
  until: number;
  /** The caller went away: stop waiting (a call whose code was sent is followed to its result). */
  signal?: AbortSignal | undefined;
  /** Told once, when the call first finds the session busy (queued here or answered busy). */
  onWait?: (() => void) | undefined;
}

export class SessionTurns {
  private readonly queues = new Map<string, PQueue>();

  /** `maxWaiting`: calls that may wait for one session on this replica, besides the one asking. */
  constructor(readonly maxWaiting: number) {}

  /**
   * Runs `attempt` (one call to the session's kernel) once it is this call's turn, and again after a
   * pause for as long as the kernel answers busy, within `wait`.
   */
  async take<T extends { busy?: true }>(session: string, wait: TurnWait, attempt: () => Promise<T>): Promise<TurnResult<T>> {
    const { until, signal } = wait;
    const start = Date.now();
    let queue = this.queues.get(session);
    if (!queue) {
      queue = new PQueue({ concurrency: 1 });
      this.queues.set(session, queue);
    }
    if (queue.size >= this.maxWaiting) return { gaveUp: 'full', waitedMs: 0 };
    let busy = false;
    const foundBusy = (): void => {
      if (!busy) wait.onWait?.();
      busy = true;
    };
    // Queued behind a call of this replica: the session is busy.
    if (queue.size > 0 || queue.pending > 0) foundBusy();
    const waited = (end: number): { waitedMs?: number } => (busy ? { waitedMs: end - start } : {});
    // Aborted only while the call waits in the queue (p-queue then drops it): once its turn came,
    // nothing aborts it, so an exec that reached the kernel is always followed to its result.
    const waiting = new AbortController();
    const timer = setTimeout(() => waiting.abort(), Math.max(0, until - Date.now()));
    const onAbort = (): void => waiting.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    const stopWaiting = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    const q = queue;
    try {
      return await q.add(
        async (): Promise<TurnResult<T>> => {
          stopWaiting();
          const r = await askUntilFree(until, signal, attempt, foundBusy);
          // A call that ran waited until its code was sent: its own run time is not waiting.
          return 'ran' in r ? { ran: r.ran, ...waited(r.sentAt) } : { gaveUp: r.gaveUp, ...waited(Date.now()) };
        },
        { signal: waiting.signal },
      );
    } catch (err) {
      if (!waiting.signal.aborted) throw err;
      return { gaveUp: signal?.aborted ? 'aborted' : 'deadline', ...waited(Date.now()) };
    } finally {
      stopWaiting();
      if (q.size === 0 && q.pending === 0 && this.queues.get(session) === q) this.queues.delete(session);
    }
  }

  /** Sessions with calls queued or asking here (for tests and leaks). */
  get sessions(): number {
    return this.queues.size;
  }
}

/** Asks until the kernel is not busy; `onBusy` is told of each busy answer. */
async function askUntilFree<T extends { busy?: true }>(
  until: number,
  signal: AbortSignal | undefined,
  attempt: () => Promise<T>,
  onBusy: () => void,
): Promise<{ ran: T; sentAt: number } | { gaveUp: GaveUp }> {
  for (let pause = FIRST_PAUSE_MS; ; pause = Math.min(pause * 2, MAX_PAUSE_MS)) {
    if (signal?.aborted) return { gaveUp: 'aborted' };
    const sentAt = Date.now();
    const r = await attempt();
    if (r.busy !== true) return { ran: r, sentAt };
    onBusy();
    const left = until - Date.now();
    if (left <= 0) return { gaveUp: 'deadline' };
    try {
      await sleep(Math.min(pause, left), undefined, signal ? { signal } : undefined);
    } catch {
      return { gaveUp: 'aborted' };
    }
  }
}
