// The gateway's time spent reading one pod's kernel stream (decoding and checking its frames on
// the one event loop every caller shares), bounded per pod. Each frame bound (src/exec/frames.ts)
// is per request; a request's worth of frames shaped to be slow to parse (deeply nested arrays:
// ~200 ms a MiB) is seconds of the loop, and a pod can have requests made again (a call read back
// over a new stream after its stream closed). So the time itself is budgeted: a burst, refilled
// at a small share of one core; a pod past it has its stream paused (the websocket stops reading,
// so the pod's writes block) until the debt is repaid. Honest kernels stay far inside it (a call
// displaying ten 2 MiB images costs ~200 ms, streaming output at the kernel's highest rate ~15 ms
// a second), and a paused pod only waits: nothing fails for it.
// The budget is a DebtBucket (src/util/debt-bucket.ts): charged after the fact, it may go into debt.

import { DebtBucket } from '../util/debt-bucket.js';

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

/** Time the streams of one user's pods may take at once (ms), all of them together. */
export const USER_READ_BURST_MS = 500;
/** Time the streams of one user's pods may take per second, over time (ms): 10% of a core. */
export const USER_READ_MS_PER_SECOND = 100;

/** Which budget a pause repays: the pod's own, or its user's (all the user's pods together). */
export const READ_BUDGET_KINDS = ['pod', 'user'] as const;
export type ReadBudgetKind = (typeof READ_BUDGET_KINDS)[number];

/** What a stream charges its reading time to: the pause it must make (ms, 0: none), and for which budget. */
export interface ReadCharge {
  charge(ms: number): { pauseMs: number; budget: ReadBudgetKind };
}

/** A pod's (or a user's) reading time: READ_BURST_MS at once, READ_MS_PER_SECOND over time. */
export class ReadBudget extends DebtBucket {
  constructor(burstMs = READ_BURST_MS, perSecondMs = READ_MS_PER_SECOND, now?: () => number) {
    super(burstMs, perSecondMs, now);
  }
}

/**
 * A pod's stream charges its pod's budget and, once the pod is known to run a user's code (a
 * session's owner, a claimed pool pod's run), that user's too, and pauses for the larger debt: a
 * user holding many sessions and runs gets no more of the loop than one user may take, however
 * many pods it has.
 */
export class PodReadCharge implements ReadCharge {
  owner: ReadBudget | undefined;

  constructor(readonly pod: ReadBudget) {}

  charge(ms: number): { pauseMs: number; budget: ReadBudgetKind } {
    const pod = this.pod.charge(ms);
    const user = this.owner?.charge(ms) ?? 0;
    return user > pod ? { pauseMs: user, budget: 'user' } : { pauseMs: pod, budget: 'pod' };
  }
}

/** The reading budgets of one process: per pod, and per user across that user's pods. */
export class ReadBudgets {
  private readonly pods = new Map<string, PodReadCharge>();
  private readonly users = new Map<string, ReadBudget>();

  constructor(private readonly now: () => number = () => performance.now()) {}

  /**
   * The pod's charge, made on first use. Making one forgets the full budgets of pods without a
   * stream (`live`) and of users no kept pod charges: a full budget carries nothing.
   */
  pod(key: string, live: (key: string) => boolean): PodReadCharge {
    let c = this.pods.get(key);
    if (!c) {
      for (const [k, other] of this.pods) if (!live(k) && other.pod.full) this.pods.delete(k);
      c = new PodReadCharge(new ReadBudget(READ_BURST_MS, READ_MS_PER_SECOND, this.now));
      this.pods.set(key, c);
    }
    return c;
  }

  /** From now on the pod's reading is charged to `user` as well (its code is that user's). */
  chargeTo(key: string, user: string, live: (key: string) => boolean): void {
    const c = this.pod(key, live);
    let u = this.users.get(user);
    if (!u) {
      const charged = new Set([...this.pods.values()].map((p) => p.owner));
      for (const [name, other] of this.users) if (!charged.has(other) && other.full) this.users.delete(name);
      u = new ReadBudget(USER_READ_BURST_MS, USER_READ_MS_PER_SECOND, this.now);
      this.users.set(user, u);
    }
    c.owner = u;
  }

  /** How many budgets are kept (pods, users): bounded by live streams plus those still owing. */
  get size(): { pods: number; users: number } {
    return { pods: this.pods.size, users: this.users.size };
  }
}

/** The user a pod's reading is charged to: its owner's name; objects with no owner share one budget. */
export function readingUser(owner: { user: string } | undefined): string {
  return owner?.user ?? '';
}
