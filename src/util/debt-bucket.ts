// A token bucket that may go into debt: a burst, refilled at a steady rate, charged after the
// fact with what was spent (a chunk's parse time, the events a chunk held), and answering how
// long to wait before spending more. Hand-written rather than the `limiter` package's TokenBucket:
// what a chunk costs is known only after it was read, so the charge may exceed what is left, which
// a bucket that refuses to hand out what it lacks does not model.

export class DebtBucket {
  private tokens: number;
  private at: number;

  constructor(
    private readonly burst: number,
    private readonly perSecond: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.tokens = burst;
    this.at = now();
  }

  /** Charges `amount`; returns how long (ms) to wait to repay any debt (0: none). */
  charge(amount: number): number {
    this.refill();
    this.tokens -= Math.max(0, amount);
    return this.tokens >= 0 ? 0 : Math.ceil((-this.tokens * 1000) / this.perSecond);
  }

  /** Full again: nothing owed or spent, so forgetting this bucket loses nothing. */
  get full(): boolean {
    this.refill();
    return this.tokens >= this.burst;
  }

  private refill(): void {
    const t = this.now();
    this.tokens = Math.min(this.burst, this.tokens + ((t - this.at) * this.perSecond) / 1000);
    this.at = t;
  }
}
