// Keys seen recently, forgotten after a time to live (the clock is a parameter, for tests).
// The run executor remembers the runs it finished: until the informer delivers the final status
// it wrote, a pod-deleted event would otherwise make the controller execute the run again.
export class RecentKeys {
  private readonly seen = new Map<string, number>();

  constructor(
    private readonly ttlMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  add(key: string): void {
    const t = this.now();
    // Insertion order is time order: expired entries are at the front.
    for (const [k, at] of this.seen) {
      if (t - at < this.ttlMs) break;
      this.seen.delete(k);
    }
    this.seen.delete(key);
    this.seen.set(key, t);
  }

  has(key: string): boolean {
    const at = this.seen.get(key);
    return at !== undefined && this.now() - at < this.ttlMs;
  }

  get size(): number {
    return this.seen.size;
  }
}
