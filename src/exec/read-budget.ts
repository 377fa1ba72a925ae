// The gateway's time spent reading one pod's kernel stream (decoding and checking its frames on
// the one event loop every caller shares), bounded per pod. Each frame bound (src/exec/frames.ts)
// is per request; a request's worth of frames shaped to be slow to parse (deeply nested arrays:
// ~200 ms a MiB) is seconds of the loop, and a pod can have requests made again (a call read back
// over a new stream after its stream closed). So the time itself is budgeted: a burst, refilled
// at a small share of one core; a pod past it has its stream paused (the websocket stops reading,
// so the pod's writes block) until the debt is repaid. Honest kernels stay far inside it (a call
// displaying ten 2 MiB images costs ~200 ms, streaming output at the kernel's highest rate ~15 ms
// a second), and a paused pod only waits: nothing fails for it.
//
// Hand-written rather than the `limiter` package's TokenBucket: the cost of a chunk is known only
// after it was read, so the budget is charged after the fact and may go into debt, which a bucket
// that refuses to hand out what it lacks does not model.

/** Time a pod's stream may take at once (ms). */
export const READ_BURST_MS = 250;
/** Time a pod's stream may take per second, over time (ms): 5% of a core. */
export const READ_MS_PER_SECOND = 50;
/**
 * What one websocket message costs before the stream sees it (ws and client-node: 1-4 µs
 * measured), charged with each: a pod writing a byte at a time (within the pieces a frame may
 * come in) sends tens of thousands a second, and that time is not in what the stream measures.
 */
export const READ_MS_PER_MESSAGE = 0.004;

export class ReadBudget {
  private tokens: number;
  private at: number;

  constructor(
    private readonly burstMs = READ_BURST_MS,
    private readonly perSecondMs = READ_MS_PER_SECOND,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.tokens = burstMs;
    this.at = now();
  }

  /** Charges `ms` of reading; returns how long reading must pause to repay any debt (0: none). */
  charge(ms: number): number {
    this.refill();
    this.tokens -= Math.max(0, ms);
    return this.tokens >= 0 ? 0 : Math.ceil((-this.tokens * 1000) / this.perSecondMs);
  }

  /** Full again: nothing owed or spent, so forgetting this budget loses nothing. */
  get full(): boolean {
    this.refill();
    return this.tokens >= this.burstMs;
  }

  private refill(): void {
    const t = this.now();
    this.tokens = Math.min(this.burstMs, this.tokens + ((t - this.at) * this.perSecondMs) / 1000);
    this.at = t;
  }
}
