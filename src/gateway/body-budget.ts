// Memory the request bodies of /mcp may take, per user and per replica. A body is up to 8 MiB and
// is held from its first byte until its response has ended: while it arrives (a client may send
// it as slowly as it likes, for Node's 5-minute request timeout), and parsed, while its call runs
// (a call that waits for a run slot, a busy session or a pod holds its arguments). Without a bound
// one user's client could hold enough to end the replica (measured: 40 bodies one byte short of
// their declared 8 MiB held 320 MiB of a gateway whose container limit is 512 MiB), and every
// other user's calls with it. Each user may hold `perUserBytes`, all users together `totalBytes`;
// a request beyond either is refused before its body is read (a body over 64 KiB is counted as it
// arrives, and refused at the first bytes that do not fit: batch-limit.ts), and the caller is told
// which and why.

export interface BodyBudgetLimits {
  /** Bytes of request bodies one user's requests in flight may hold on this replica. */
  perUserBytes: number;
  /** Bytes of request bodies all requests in flight may hold on this replica. */
  totalBytes: number;
}

const MiB = 1024 * 1024;

/**
 * Room for four of the largest requests (8 MiB) per user, and far more of the usual ones (a call
 * is a few KiB; the largest legal code and stdin together about 3 MiB once JSON-escaped); a
 * quarter of the replica's budget, so one user cannot take it all. The total keeps bodies to a
 * quarter of the chart's 512 MiB memory limit (a body's parse briefly costs about twice its size).
 */
export const BODY_BUDGET_DEFAULTS: BodyBudgetLimits = { perUserBytes: 32 * MiB, totalBytes: 128 * MiB };

/** Which budget refused a request. */
export type BodyBudgetLimit = 'user' | 'total';

/** One request's share of the budget: grows with its body, given back once (release). */
export interface BodyHold {
  /** The budget's limits (for the refusal's text). */
  readonly limits: BodyBudgetLimits;
  /** Takes `bytes` more, or says which budget has no room for them (nothing is taken then). */
  take(bytes: number): BodyBudgetLimit | undefined;
  /**
   * Counts `bytes` more whatever the budget: what is made already (a run's result, to be sent).
   * The user's later requests find the budget used by it until it has been sent.
   */
  add(bytes: number): void;
  /**
   * Gives back everything taken, now or, while the hold is retained, once the last retainer is
   * done; takes after that are not counted. Idempotent.
   */
  release(): void;
  /**
   * Keeps everything held, past release(), until the returned function is called (once): a tool
   * still running keeps its request's parsed arguments after the client went away.
   */
  retain(): () => void;
}

export class BodyBudget {
  private used = 0;
  private readonly byUser = new Map<string, number>();

  constructor(readonly limits: BodyBudgetLimits = BODY_BUDGET_DEFAULTS) {}

  /** Bytes held in all, and by `user` (tests, logs). */
  held(user?: string): number {
    return user === undefined ? this.used : (this.byUser.get(user) ?? 0);
  }

  /** A hold for one request of `user` (the authenticated user name; '' without authentication). */
  hold(user: string): BodyHold {
    let mine = 0;
    let released = false;
    let ended = false;
    let retainers = 0;
    const free = (): void => {
      if (released) return;
      released = true;
      if (mine === 0) return;
      this.used -= mine;
      const left = (this.byUser.get(user) ?? 0) - mine;
      if (left > 0) this.byUser.set(user, left);
      else this.byUser.delete(user);
    };
    return {
      limits: this.limits,
      take: (bytes) => {
        if (released || bytes <= 0) return undefined;
        const theirs = this.byUser.get(user) ?? 0;
        if (theirs + bytes > this.limits.perUserBytes) return 'user';
        if (this.used + bytes > this.limits.totalBytes) return 'total';
        mine += bytes;
        this.used += bytes;
        this.byUser.set(user, theirs + bytes);
        return undefined;
      },
      add: (bytes) => {
        if (released || bytes <= 0) return;
        mine += bytes;
        this.used += bytes;
        this.byUser.set(user, (this.byUser.get(user) ?? 0) + bytes);
      },
      release: () => {
        ended = true;
        if (retainers === 0) free();
      },
      retain: () => {
        if (released) return () => undefined;
        retainers++;
        let done = false;
        return () => {
          if (done) return;
          done = true;
          retainers--;
          if (ended && retainers === 0) free();
        };
      },
    };
  }
}

const holds = new WeakMap<Request, BodyHold>();

/**
 * `req`'s hold, for what its tools keep until its response has ended: a read_file reply is the
 * file twice (text and structuredContent) as JSON, an execute_code reply its output and images,
 * held while they are sent. Without it one user's concurrent reads of a session's largest files
 * (~20 MiB each at 8 MiB, as many as the user sends), or results with images read slowly (a slow
 * reader is never cut: stall-guard.ts), ended the replica, and every other user's calls with it.
 */
export function holdOf(req: Request | undefined): BodyHold | undefined {
  return req ? holds.get(req) : undefined;
}

/** Makes `hold` the hold of `req` (and of the requests rebuilt from it) for holdOf. */
export function keepHold(req: Request, hold: BodyHold): void {
  holds.set(req, hold);
}

/** The answer to a request the budget has no room for: 429 for the user's own share, 503 for the replica's. */
export function bodyBudgetRefused(limit: BodyBudgetLimit, limits: BodyBudgetLimits): Response {
  const mib = (n: number): string => `${Math.round(n / MiB)} MiB`;
  const message =
    limit === 'user'
      ? `Too many requests: your requests in flight on this gateway replica (calls running or waiting, and bodies still arriving) already hold ${mib(limits.perUserBytes)}, the most one user may. Nothing in this request was run. Wait for some of your calls to finish, then retry; send large data in fewer requests at once.`
      : `The gateway replica is holding ${mib(limits.totalBytes)} of request bodies for its callers, its limit. Nothing in this request was run. Retry in a few seconds.`;
  return Response.json(
    { jsonrpc: '2.0', error: { code: -32000, message, data: { limit: limit === 'user' ? 'user_request_bytes' : 'request_bytes' } }, id: null },
    { status: limit === 'user' ? 429 : 503, headers: { 'Retry-After': limit === 'user' ? '5' : '2' } },
  );
}
