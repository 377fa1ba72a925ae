// A work queue with controller-runtime semantics: a key is queued at most once (dedupe), never
// processed by two workers at once (a key re-added while processing is processed again after),
// failed keys come back with exponential backoff, and `addAfter` schedules time-based work.
export interface QueueMetrics {
  adds(): void;
  retries(): void;
  depth(n: number): void;
  queueDuration(seconds: number): void;
  workDuration(seconds: number): void;
}

/** The longest delay a timer holds (2^31 - 1 ms). */
export const MAX_TIMER_MS = 2 ** 31 - 1;

export type Handler = (key: string) => Promise<{ requeueAfterMs?: number } | void>;

export interface WorkQueueOptions {
  workers: number;
  baseDelayMs?: number;
  maxDelayMs?: number;
  metrics?: QueueMetrics;
  onError?: (key: string, err: unknown) => void;
  /**
   * Hold keys until start(): a controller must not reconcile before every informer it reads
   * has listed (a pod not yet in the cache would look deleted).
   */
  startPaused?: boolean;
}

export class WorkQueue {
  private readonly queue: string[] = [];
  private readonly queued = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly dirty = new Set<string>();
  private readonly addedAt = new Map<string, number>();
  private readonly failures = new Map<string, number>();
  private readonly timers = new Map<string, { timer: NodeJS.Timeout; due: number }>();
  private active = 0;
  private stopped = false;
  private idleWaiters: Array<() => void> = [];
  private paused: boolean;

  constructor(
    private readonly handler: Handler,
    private readonly opts: WorkQueueOptions,
  ) {
    this.paused = opts.startPaused ?? false;
  }

  /** Starts processing keys held since construction (startPaused). */
  start(): void {
    this.paused = false;
    this.pump();
  }

  add(key: string): void {
    if (this.stopped) return;
    this.opts.metrics?.adds();
    if (this.processing.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (this.queued.has(key)) return;
    this.queued.add(key);
    this.queue.push(key);
    this.addedAt.set(key, performance.now());
    this.opts.metrics?.depth(this.queue.length);
    this.pump();
  }

  /**
   * Adds the key after a delay; an earlier pending delay for the key wins. A delay past what a
   * timer can hold (~24.8 days; Node fires a longer one after 1 ms) or not a number waits that
   * long and is judged again then: a time computed from a far-future field (a status's
   * completionTime, say) must not turn into a reconcile every millisecond.
   */
  addAfter(key: string, requestedMs: number): void {
    if (this.stopped) return;
    if (requestedMs <= 0) return this.add(key);
    const ms = Number.isFinite(requestedMs) ? Math.min(requestedMs, MAX_TIMER_MS) : MAX_TIMER_MS;
    const due = performance.now() + ms;
    const existing = this.timers.get(key);
    if (existing) {
      if (existing.due <= due) return;
      clearTimeout(existing.timer);
    }
    const timer = setTimeout(() => {
      this.timers.delete(key);
      this.add(key);
    }, ms);
    timer.unref();
    this.timers.set(key, { timer, due });
  }

  private addRateLimited(key: string): void {
    const n = (this.failures.get(key) ?? 0) + 1;
    this.failures.set(key, n);
    this.opts.metrics?.retries();
    const base = this.opts.baseDelayMs ?? 5;
    const max = this.opts.maxDelayMs ?? 60_000;
    this.addAfter(key, Math.min(max, base * 2 ** (n - 1)));
  }

  get length(): number {
    return this.queue.length;
  }

  /** Resolves when nothing is queued or processing (tests and graceful shutdown). */
  async idle(): Promise<void> {
    if (this.queue.length === 0 && this.active === 0) return;
    await new Promise<void>((r) => this.idleWaiters.push(r));
  }

  stop(): void {
    this.stopped = true;
    for (const t of this.timers.values()) clearTimeout(t.timer);
    this.timers.clear();
  }

  private pump(): void {
    while (!this.stopped && !this.paused && this.active < this.opts.workers && this.queue.length > 0) {
      const key = this.queue.shift() as string;
      this.queued.delete(key);
      this.processing.add(key);
      this.active++;
      const added = this.addedAt.get(key);
      this.addedAt.delete(key);
      if (added !== undefined) this.opts.metrics?.queueDuration((performance.now() - added) / 1000);
      this.opts.metrics?.depth(this.queue.length);
      void this.process(key);
    }
    if (this.queue.length === 0 && this.active === 0) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      waiters.forEach((w) => w());
    }
  }

  private async process(key: string): Promise<void> {
    const start = performance.now();
    try {
      const r = await this.handler(key);
      this.failures.delete(key);
      if (r && r.requeueAfterMs !== undefined) this.addAfter(key, r.requeueAfterMs);
    } catch (err) {
      this.opts.onError?.(key, err);
      this.addRateLimited(key);
    } finally {
      this.opts.metrics?.workDuration((performance.now() - start) / 1000);
      this.processing.delete(key);
      this.active--;
      if (this.dirty.delete(key)) this.add(key);
      this.pump();
    }
  }
}
