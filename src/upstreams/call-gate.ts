// How many tool calls this replica has in flight to one upstream, and whose. An upstream is shared
// by the whole team, and a program can fire calls as fast as it likes (32 at a time per execution,
// and a user may have many executions): without a bound, one user's code could hold every
// connection an upstream serves and make everyone else's calls wait behind it, or overload it.
// Each upstream takes at most `perServer` calls at once from this replica and each user at most
// `perUser` of them; calls past either wait in line, and a freed place goes to the users waiting
// in turn (round robin), never to whoever queued most. Hand-written: the queue libraries (p-limit,
// p-queue) bound one pool, not one pool shared fairly between keys with a cap per key.
import { UpstreamError } from './types.js';

export interface CallGateLimits {
  /** Calls one upstream has in flight at once (from this replica). */
  perServer: number;
  /** Of those, calls one user has in flight at once. */
  perUser: number;
}

/** Calls of one user that may wait for one upstream; a call past it is refused at once. */
export const MAX_WAITING_PER_USER = 256;

interface Waiter {
  grant(): void;
}

interface Line {
  /** In flight, all users. */
  active: number;
  /** In flight by user. */
  byUser: Map<string, number>;
  /** Waiting, by user, in the order each user's calls came; the Map's order is the turn order. */
  waiting: Map<string, Waiter[]>;
}

export class CallGate {
  private readonly lines = new Map<string, Line>();

  /** `observe`: told the counts of a server after each change (for the gauges). */
  constructor(
    private readonly limits: CallGateLimits,
    private readonly observe?: (server: string, calls: { active: number; waiting: number }) => void,
  ) {}

  /**
   * Waits for a place for `user`'s call to `server` and returns its release (call it exactly once,
   * when the call ended). Rejects with UpstreamError when `signal` aborts first ('timeout' if its
   * reason is a TimeoutError, else 'aborted') or when too many of the user's calls wait already.
   */
  acquire(server: string, user: string, signal?: AbortSignal): Promise<() => void> {
    const now = this.tryAcquire(server, user);
    if (now) return Promise.resolve(now);
    const line = this.line(server);
    const mine = line.waiting.get(user) ?? [];
    if (mine.length >= MAX_WAITING_PER_USER) {
      return Promise.reject(
        new UpstreamError(
          'busy',
          `${mine.length} of your calls to ${server} are already waiting (at most ${this.limits.perUser} run at once for one user); wait for them before making more.`,
        ),
      );
    }
    if (signal?.aborted) return Promise.reject(stopped(server, signal, this.limits.perUser));
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        grant: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve(this.take(server, line, user));
        },
      };
      const onAbort = (): void => {
        const queue = line.waiting.get(user);
        const at = queue?.indexOf(waiter) ?? -1;
        if (queue && at >= 0) {
          queue.splice(at, 1);
          if (queue.length === 0) line.waiting.delete(user);
        }
        this.changed(server);
        this.forget(server, line);
        reject(stopped(server, signal, this.limits.perUser));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      mine.push(waiter);
      line.waiting.set(user, mine);
      this.changed(server);
    });
  }

  /** A place at once, or undefined when the call would have to wait (nobody is overtaken). */
  tryAcquire(server: string, user: string): (() => void) | undefined {
    const line = this.line(server);
    // A user with calls in line keeps their order: a new call of theirs waits behind them.
    if (!this.fits(line, user) || line.waiting.has(user)) {
      this.forget(server, line);
      return undefined;
    }
    const release = this.take(server, line, user);
    this.changed(server);
    return release;
  }

  /** The error of a call to `server` that waited (almost) its whole time for a place. */
  timedOut(server: string): UpstreamError {
    return waitedTooLong(server, this.limits.perUser);
  }

  /** Calls in flight and waiting for `server` (for tests and metrics). */
  stats(server: string): { active: number; waiting: number } {
    const line = this.lines.get(server);
    let waiting = 0;
    for (const q of line?.waiting.values() ?? []) waiting += q.length;
    return { active: line?.active ?? 0, waiting };
  }

  private changed(server: string): void {
    this.observe?.(server, this.stats(server));
  }

  private line(server: string): Line {
    let line = this.lines.get(server);
    if (!line) this.lines.set(server, (line = { active: 0, byUser: new Map(), waiting: new Map() }));
    return line;
  }

  private fits(line: Line, user: string): boolean {
    return line.active < this.limits.perServer && (line.byUser.get(user) ?? 0) < this.limits.perUser;
  }

  private take(server: string, line: Line, user: string): () => void {
    line.active++;
    line.byUser.set(user, (line.byUser.get(user) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      line.active--;
      const left = (line.byUser.get(user) ?? 1) - 1;
      if (left === 0) line.byUser.delete(user);
      else line.byUser.set(user, left);
      this.next(line);
      this.changed(server);
      this.forget(server, line);
    };
  }

  /** Grants places to waiting users in turn while they fit; a served user goes to the back. */
  private next(line: Line): void {
    let progressed = true;
    while (progressed && line.active < this.limits.perServer && line.waiting.size > 0) {
      progressed = false;
      for (const [user, queue] of line.waiting) {
        if (!this.fits(line, user)) continue;
        const waiter = queue.shift() as Waiter;
        line.waiting.delete(user);
        if (queue.length > 0) line.waiting.set(user, queue);
        waiter.grant();
        progressed = true;
        break;
      }
    }
  }

  /** Drops an idle server's line, so servers that come and go leave nothing behind. */
  private forget(server: string, line: Line): void {
    if (line.active === 0 && line.waiting.size === 0 && this.lines.get(server) === line) this.lines.delete(server);
  }
}

function stopped(server: string, signal: AbortSignal | undefined, perUser: number): UpstreamError {
  const reason = signal?.reason as { name?: unknown } | undefined;
  if (reason?.name === 'TimeoutError') return waitedTooLong(server, perUser);
  return new UpstreamError('aborted', `The call of ${server} was cancelled while it waited for a place.`);
}

function waitedTooLong(server: string, perUser: number): UpstreamError {
  return new UpstreamError(
    'timeout',
    `The call of ${server} waited its whole time for a place: at most ${perUser} of one user's calls to it run at once, and your others (or the team's) were still running. Make fewer calls at once.`,
  );
}
