// Writes audit records of session calls in the background: record() only queues (no I/O, never
// throws), so a session call gains no API write on its path. Calls of one session are written
// together: a record waits up to `lingerMs` for the calls after it (and while a record of its
// session is being written), then one SandboxRun lists them all (status.calls, at most
// MAX_AUDIT_CALLS) — a create and a status write per record instead of per call, which at a
// session's call rate were half of each call's CPU on a small node (docs/performance.md).
//
// What is dropped — counted (codemode_audit_records_total{result="dropped"}) and logged as counts
// and an HTTP status or error class only, never a record's fields or an error's message (either may
// quote sandbox output):
// - The queue is bounded (`capacity`) and shared, so drops fall on the user holding the most of it:
//   once it is full, a call of a user holding fewer queued calls than the largest holder takes the
//   place of that holder's newest call; a call of the largest holder (or of one tied with it) is
//   dropped itself. Over the bound after a retry puts calls back, the largest holders' newest go.
// - A failed write is retried only when it may succeed later (`retryable`: 429, 5xx, no answer);
//   then all writers pause with back-off (500 ms..30 s). A call whose writes have failed for
//   `retryForMs` (10 min) is dropped, so no record blocks the others for ever. Any other failure
//   (a 4xx, an error thrown before the request left) is dropped at once.
import { setHeaderOptions } from '@kubernetes/client-node/dist/middleware.js';
import { PatchStrategy } from '@kubernetes/client-node/dist/patch.js';
import type { Logger } from 'pino';
import { GROUP, MAX_AUDIT_CALLS, SANDBOXRUN_PLURAL, VERSION } from '../api/v1alpha1/index.js';
import { isNotFound, isTooLarge, statusOf, type KubeClients } from '../kube/clients.js';
import { isNetworkError } from '../util/network-error.js';
import { auditBatchStatus, auditRunBody, type AuditEntry } from './record.js';

/** What happened to a call's record; a closed set (metric label). Counted per call. */
export type AuditResult = 'written' | 'dropped';

/** How long a call waits for the next calls of its session before its record is written. */
export const AUDIT_LINGER_MS = 1000;

/** How long a call's writes may keep failing (and be retried) before it is dropped. */
export const AUDIT_RETRY_FOR_MS = 10 * 60_000;

export interface AuditWriterOptions {
  /** CODEMODE_AUDIT_QUEUE_LENGTH: calls held waiting to be written, by all users together. */
  capacity: number;
  /** Records written at once (one per session at a time). */
  concurrency?: number;
  /** How long a call waits for more of its session's calls (AUDIT_LINGER_MS). */
  lingerMs?: number;
  /** Calls per record (MAX_AUDIT_CALLS). */
  maxCallsPerRecord?: number;
  /** How long from its first failed write a call is retried before it is dropped (AUDIT_RETRY_FOR_MS). */
  retryForMs?: number;
  ttlSecondsAfterFinished?: number;
  onResult?(result: AuditResult): void;
  onQueue?(length: number): void;
}

const RETRY_MIN_MS = 500;
const RETRY_MAX_MS = 30_000;
/** Drops are logged at most this often (with how many since the last line). */
const DROP_LOG_INTERVAL_MS = 60_000;

/** A client-side request timeout (AbortSignal.timeout's TimeoutError) anywhere in the cause chain. */
function isRequestTimeout(err: unknown, depth = 0): boolean {
  if (err === null || typeof err !== 'object' || depth > 5) return false;
  const e = err as { name?: unknown; error?: unknown; cause?: unknown };
  return e.name === 'TimeoutError' || isRequestTimeout(e.error, depth + 1) || isRequestTimeout(e.cause, depth + 1);
}

/**
 * Pure: whether a failed write may succeed when tried again — the API server answered 429 or 5xx
 * (but not etcd's "request is too large", which never fits), or did not answer at all (a network
 * error, a request timeout). Any other answer, and any error thrown before a request left (a
 * TypeError or RangeError building or sending the body), fails the same way every time.
 */
export function retryable(err: unknown): boolean {
  const status = httpStatus(err);
  if (status !== undefined) return (status === 429 || status >= 500) && !isTooLarge(err);
  return isNetworkError(err) || isRequestTimeout(err);
}

/** The HTTP status the API server answered with; not a DOMException's legacy `code` (TimeoutError's is 23). */
function httpStatus(err: unknown): number | undefined {
  const status = statusOf(err);
  return status !== undefined && status >= 100 && status <= 599 ? status : undefined;
}

/** What a log line may say of a failed write: its HTTP status or its error class, never its message. */
function failureOf(err: unknown): string {
  const status = httpStatus(err);
  if (status !== undefined) return `HTTP ${status}`;
  const name = err instanceof Error ? err.name : typeof err;
  return /^[A-Za-z]{1,40}$/.test(name) ? name : 'an error';
}

/** A call waiting to be written. */
interface Queued {
  entry: AuditEntry;
  /** Queue order over all sessions: the newest call has the highest. */
  seq: number;
  /** When a write of it first failed with an error worth retrying (performance.now()). */
  failingSince?: number;
}

/** The calls of one session waiting for their record, oldest first. */
interface Pending {
  user: string;
  entries: Queued[];
  /** When the oldest of them was queued (performance.now()); 0: due at once (a retry). */
  since: number;
}

/** Which session's record to write now, or when to look again (undefined: nothing to wait for). */
export type DueChoice = { take: string } | { wakeAt: number } | undefined;

/**
 * Pure: the first session (in `pending`'s order) none of whose records is being written and whose
 * record is due — its oldest call waited `lingerMs`, it has `max` calls, or the writer is stopping
 * (`flushing`) — else when the soonest of the others is due.
 */
export function chooseDue(
  pending: ReadonlyMap<string, { entries: readonly unknown[]; since: number }>,
  writing: ReadonlySet<string>,
  now: number,
  lingerMs: number,
  max: number,
  flushing: boolean,
): DueChoice {
  let wakeAt = Infinity;
  for (const [key, p] of pending) {
    if (writing.has(key)) continue;
    if (flushing || p.entries.length >= max || now - p.since >= lingerMs) return { take: key };
    wakeAt = Math.min(wakeAt, p.since + lingerMs);
  }
  return wakeAt === Infinity ? undefined : { wakeAt };
}

/** Calls of the same session and owner share records; the queue is shared fairly by user. */
const userOf = (e: AuditEntry): string => e.owner?.user ?? '';
const sessionKey = (e: AuditEntry): string => `${e.namespace}/${e.session}/${userOf(e)}`;

export class AuditWriter {
  /** By session, in the order their oldest call was queued. */
  private readonly pending = new Map<string, Pending>();
  /** Calls queued (in `pending`). */
  private queued = 0;
  /** By user: calls queued and the sessions (keys of `pending`) holding them; users with none are absent. */
  private readonly users = new Map<string, { calls: number; sessions: Set<string> }>();
  private seq = 0;
  /** Sessions whose record is being written: their next calls wait for it. */
  private readonly writing = new Set<string>();
  private active = 0;
  private backoffMs = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private lingerTimer: NodeJS.Timeout | undefined;
  /** When lingerTimer fires (performance.now()); Infinity when none is set. */
  private lingerDue = Infinity;
  private dropped = 0;
  private lastDropLog = 0;
  private readonly idle = new Set<() => void>();
  /** Stopping: lingering calls are written now. */
  private flushing = false;
  private stopped = false;

  constructor(
    private readonly clients: KubeClients,
    private readonly opts: AuditWriterOptions,
    private readonly log: Logger,
  ) {}

  /**
   * Queues a call's record; returns at once. false when it was dropped: the writer is stopping, or
   * the queue is full and the call's user holds the most of it (else that user's newest call goes).
   */
  record(entry: AuditEntry): boolean {
    const user = userOf(entry);
    const full = `the queue is full (CODEMODE_AUDIT_QUEUE_LENGTH=${this.opts.capacity})`;
    if (this.stopped || (this.queued >= this.opts.capacity && !this.evictFor(user, `${full}: the user holding the most lost the newest`))) {
      this.drop(this.stopped ? 'the operator is stopping' : `${full} and the user holds the most of it`);
      return false;
    }
    const key = sessionKey(entry);
    const q: Queued = { entry, seq: this.seq++ };
    const p = this.pending.get(key);
    if (p) p.entries.push(q);
    else this.add(key, { user, entries: [q], since: performance.now() });
    this.count(user, 1);
    this.opts.onQueue?.(this.queued);
    this.pump();
    return true;
  }

  /** Calls waiting to be written. */
  get length(): number {
    return this.queued;
  }

  /** Writes what is queued, for at most `timeoutMs`; what is left then is dropped (shutdown). */
  async stop(timeoutMs: number): Promise<void> {
    this.flushing = true;
    this.pump();
    await new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.idle.delete(done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      if (this.queued === 0 && this.active === 0) return done();
      this.idle.add(done);
    });
    this.stopped = true;
    clearTimeout(this.retryTimer);
    clearTimeout(this.lingerTimer);
    this.lingerDue = Infinity;
    const left = this.queued;
    this.pending.clear();
    this.users.clear();
    this.queued = 0;
    for (let i = 0; i < left; i++) this.drop('the operator stopped before it was written');
  }

  private pump(): void {
    const concurrency = this.opts.concurrency ?? 4;
    while (!this.stopped && this.retryTimer === undefined && this.active < concurrency) {
      const batch = this.takeDue();
      if (!batch) return;
      this.active++;
      void this.write(batch.key, batch.entries).finally(() => {
        this.active--;
        this.writing.delete(batch.key);
        this.opts.onQueue?.(this.queued);
        if (this.queued === 0 && this.active === 0) for (const cb of [...this.idle]) cb();
        this.pump();
      });
    }
  }

  /** The calls of the next due session (chooseDue), or undefined; a timer wakes the writer for the next. */
  private takeDue(): { key: string; entries: Queued[] } | undefined {
    const now = performance.now();
    const max = this.opts.maxCallsPerRecord ?? MAX_AUDIT_CALLS;
    const choice = chooseDue(this.pending, this.writing, now, this.opts.lingerMs ?? AUDIT_LINGER_MS, max, this.flushing);
    if (choice !== undefined && 'take' in choice) {
      const key = choice.take;
      const p = this.pending.get(key) as Pending;
      const entries = p.entries.splice(0, max);
      this.count(p.user, -entries.length);
      // The rest start a record of their own (behind the other sessions).
      this.pending.delete(key);
      if (p.entries.length > 0) this.pending.set(key, { user: p.user, entries: p.entries, since: now });
      else this.forget(key, p.user);
      this.writing.add(key);
      return { key, entries };
    }
    if (choice !== undefined && choice.wakeAt < this.lingerDue) {
      clearTimeout(this.lingerTimer);
      this.lingerDue = choice.wakeAt;
      this.lingerTimer = setTimeout(
        () => {
          this.lingerTimer = undefined;
          this.lingerDue = Infinity;
          this.pump();
        },
        Math.max(1, choice.wakeAt - now),
      );
      this.lingerTimer.unref();
    }
    return undefined;
  }

  private async write(key: string, batch: Queued[]): Promise<void> {
    const entries = batch.map((q) => q.entry);
    try {
      // Named after its first call: a retry after a lost answer finds the record it created.
      await this.create(entries[0] as AuditEntry);
      await this.patchStatus(entries);
      this.backoffMs = 0;
      for (const _ of entries) this.opts.onResult?.('written');
    } catch (err) {
      if (retryable(err) && !this.stopped) {
        this.retry(key, batch, err);
        return;
      }
      // The status or class only: the API server's message may quote the record's fields.
      for (const _ of entries) this.drop(`a write failed with ${failureOf(err)}, which is not retried`);
    }
  }

  /**
   * The API server is unreachable or overloaded: the calls go back first in their session's line,
   * due at once, and all writers pause; those failing for `retryForMs` already are dropped, and the
   * queue bound decides what else is dropped meanwhile.
   */
  private retry(key: string, batch: Queued[], err: unknown): void {
    const now = performance.now();
    const limit = this.opts.retryForMs ?? AUDIT_RETRY_FOR_MS;
    for (const q of batch) q.failingSince ??= now;
    const keep = batch.filter((q) => now - (q.failingSince ?? now) < limit);
    const user = userOf((batch[0] as Queued).entry);
    if (keep.length > 0) {
      const p = this.pending.get(key);
      this.pending.delete(key);
      if (p) this.pending.set(key, { user, entries: [...keep, ...p.entries], since: 0 });
      else this.add(key, { user, entries: keep, since: 0 });
      this.count(user, keep.length);
    }
    for (let i = keep.length; i < batch.length; i++) this.drop(`its writes failed for ${limit} ms (the last with ${failureOf(err)})`);
    this.shed(`the queue is full (CODEMODE_AUDIT_QUEUE_LENGTH=${this.opts.capacity}) while the API server is unreachable`);
    this.pause();
    this.log.debug({ failure: failureOf(err) }, 'Failed to write an audit record; retrying');
  }

  /** Back over the bound after a retry: the newest calls of the users holding the most go. */
  private shed(why: string): void {
    while (this.queued > this.opts.capacity) {
      const user = this.largestHolder();
      if (user === undefined) return;
      this.dropNewestOf(user, why);
    }
  }

  /** A full queue and a call of `user`: whether the newest call of a user holding more made room for it. */
  private evictFor(user: string, why: string): boolean {
    const largest = this.largestHolder();
    if (largest === undefined || (this.users.get(largest)?.calls ?? 0) <= (this.users.get(user)?.calls ?? 0)) return false;
    this.dropNewestOf(largest, why);
    return true;
  }

  /** The user holding the most queued calls; of several, the one queued most recently. O(users). */
  private largestHolder(): string | undefined {
    let largest: string | undefined;
    let most = 0;
    for (const [user, u] of this.users) if (u.calls > 0 && u.calls >= most) [largest, most] = [user, u.calls];
    return largest;
  }

  /** Drops `user`'s newest queued call: the last of one of its sessions. O(its sessions). */
  private dropNewestOf(user: string, why: string): void {
    let newest: { key: string; p: Pending; seq: number } | undefined;
    for (const key of this.users.get(user)?.sessions ?? []) {
      const p = this.pending.get(key) as Pending;
      const seq = (p.entries.at(-1) as Queued).seq;
      if (!newest || seq > newest.seq) newest = { key, p, seq };
    }
    if (!newest) return;
    newest.p.entries.pop();
    this.count(user, -1);
    if (newest.p.entries.length === 0) {
      this.pending.delete(newest.key);
      this.forget(newest.key, user);
    }
    this.drop(why);
  }

  /** A session's first calls are queued. */
  private add(key: string, p: Pending): void {
    this.pending.set(key, p);
    const u = this.users.get(p.user);
    if (u) u.sessions.add(key);
    else this.users.set(p.user, { calls: 0, sessions: new Set([key]) });
  }

  /** A session holds no queued calls any more (removed from `pending`, its calls counted off). */
  private forget(key: string, user: string): void {
    const u = this.users.get(user);
    u?.sessions.delete(key);
    if (u?.sessions.size === 0) this.users.delete(user);
  }

  private count(user: string, n: number): void {
    this.queued += n;
    const u = this.users.get(user);
    if (u) u.calls += n;
  }

  private pause(): void {
    if (this.retryTimer) return;
    this.backoffMs = Math.min(RETRY_MAX_MS, Math.max(RETRY_MIN_MS, this.backoffMs * 2));
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      this.pump();
    }, this.backoffMs);
    this.retryTimer.unref();
  }

  private async create(e: AuditEntry): Promise<void> {
    try {
      await this.clients.custom.createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: e.namespace,
        plural: SANDBOXRUN_PLURAL,
        body: auditRunBody(e, this.opts.ttlSecondsAfterFinished),
      });
    } catch (err) {
      // Created by an earlier attempt whose answer was lost: the name is the record's own.
      if (statusOf(err) !== 409) throw err;
    }
  }

  private async patchStatus(entries: readonly AuditEntry[]): Promise<void> {
    const e = entries[0] as AuditEntry;
    try {
      await this.clients.custom.patchNamespacedCustomObjectStatus(
        { group: GROUP, version: VERSION, namespace: e.namespace, plural: SANDBOXRUN_PLURAL, name: e.name, body: { status: auditBatchStatus(entries) } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
    } catch (err) {
      // Deleted meanwhile (its namespace went away): nothing left to record into.
      if (!isNotFound(err)) throw err;
    }
  }

  private drop(why: string): void {
    this.dropped++;
    this.opts.onResult?.('dropped');
    const now = Date.now();
    if (now - this.lastDropLog < DROP_LOG_INTERVAL_MS) return;
    this.log.warn({ dropped: this.dropped, queued: this.queued, why }, 'Dropped audit records of session calls');
    this.lastDropLog = now;
    this.dropped = 0;
  }
}
