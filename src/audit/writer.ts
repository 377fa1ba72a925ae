// Writes audit records of session calls in the background: record() only queues (no I/O, never
// throws), so a session call gains no API write on its path. Calls of one session are written
// together: a record waits up to `lingerMs` for the calls after it (and while a record of its
// session is being written), then one SandboxRun lists them all (status.calls, at most
// MAX_AUDIT_CALLS) — a create and a status write per record instead of per call, which at a
// session's call rate were half of each call's CPU on a small node (docs/performance.md).
//
// This file does the writing (the API calls, retries and back-off, the linger timer, stop); which
// calls wait, and whose go when the queue is full, is the bookkeeping of AuditQueue (./queue.ts).
//
// What is dropped — counted (codemode_audit_records_total{result="dropped"}) and logged as counts
// and an HTTP status or error class only, never a record's fields or an error's message (either may
// quote sandbox output); at most a line a minute, the drops of that minute in the next, and on stop
// those not logged yet with the calls still being written (the metrics go with the process):
// - The queue is bounded (`capacity`) and shared, so drops fall on the user holding the most of it
//   (AuditQueue): once it is full, a call takes the place of the largest holder's newest, or is
//   dropped itself if its user is (or ties with) the largest holder; over the bound after a retry
//   puts calls back, the largest holders' newest go.
// - A failed write is retried only when it may succeed later (`retryable`: 429, 5xx, no answer;
//   and a 403 of a full ResourceQuota, which frees up as records reach their TTL);
//   then all writers pause with back-off (500 ms..30 s). A call whose writes have failed for
//   `retryForMs` (10 min) is dropped, so no record blocks the others for ever. Any other failure
//   (a 4xx, an error thrown before the request left) is dropped at once.
import { setHeaderOptions } from '@kubernetes/client-node/dist/middleware.js';
import { PatchStrategy } from '@kubernetes/client-node/dist/patch.js';
import type { Logger } from 'pino';
import { GROUP, MAX_AUDIT_CALLS, SANDBOXRUN_PLURAL, VERSION } from '../api/v1alpha1/index.js';
import { apiErrorMessage, httpStatus, isNotFound, retryable, statusOf, type KubeClients } from '../kube/clients.js';
import { quotaExceeded } from '../limits/run-slots.js';
import { atRecordCap, type LiveRecords, type RecordCaps } from './live-records.js';
import { AuditQueue, HELD_RECHECK_MS, type Queued } from './queue.js';
import { ANNOTATION_EXECUTOR, AUDIT_EXECUTOR } from '../api/v1alpha1/labels.js';
import { generateRunName } from '../sandbox/names.js';
import { ANNOTATION_CODE_SHA256, auditBatchStatus, auditRunBody, type AuditEntry } from './record.js';

export { chooseDue, type DueChoice } from './queue.js';

/** What happened to a call's record; a closed set (metric label). Counted per call. */
export const AUDIT_RESULTS = ['written', 'dropped'] as const;
export type AuditResult = (typeof AUDIT_RESULTS)[number];

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
  /**
   * Caps on the audit records live in the namespace (live-records.ts), and how many there are now
   * (from the SandboxRun cache); without them, records are not capped.
   */
  recordCaps?: { caps: RecordCaps; live(): LiveRecords };
  onResult?(result: AuditResult): void;
  onQueue?(length: number): void;
}

const RETRY_MIN_MS = 500;
const RETRY_MAX_MS = 30_000;
/** Drops are logged at most this often (with how many since the last line). */
const DROP_LOG_INTERVAL_MS = 60_000;

/** The start of a drop's reason when the queue holds `capacity` calls. */
const queueFull = (capacity: number): string => `the queue is full (CODEMODE_AUDIT_QUEUE_LENGTH=${capacity})`;

/** The namespace's ResourceQuota refused the record (403 "exceeded quota"). */
const overQuota = (err: unknown): boolean => quotaExceeded(statusOf(err), apiErrorMessage(err)) !== undefined;

/** What a log line may say of a failed write: its HTTP status or its error class, never its message. */
function failureOf(err: unknown): string {
  const status = httpStatus(err);
  if (status !== undefined) return `HTTP ${status}`;
  const name = err instanceof Error ? err.name : typeof err;
  return /^[A-Za-z]{1,40}$/.test(name) ? name : 'an error';
}

export class AuditWriter {
  /** The calls waiting to be written; a call it drops (evicted, shed) is dropped here. */
  private readonly queue: AuditQueue;
  /** Sessions whose record is being written: their next calls wait for it. */
  private readonly writing = new Set<string>();
  private active = 0;
  private backoffMs = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private lingerTimer: NodeJS.Timeout | undefined;
  /** When lingerTimer fires (performance.now()); Infinity when none is set. */
  private lingerDue = Infinity;
  /** Drops not yet in a log line, and the reason of the last of them. */
  private dropped = 0;
  private lastDropWhy = '';
  private lastDropLog = 0;
  /** Logs the drops counted since the last line, once DROP_LOG_INTERVAL_MS has passed since it. */
  private dropLogTimer: NodeJS.Timeout | undefined;
  /** Calls whose write is in flight. */
  private writingCalls = 0;
  private readonly idle = new Set<() => void>();
  /** Stopping: lingering calls are written now. */
  private flushing = false;
  private stopped = false;
  /** The live records as last counted (at most every HELD_RECHECK_MS), with the ones written here since. */
  private live: { at: number; records: LiveRecords } | undefined;

  constructor(
    private readonly clients: KubeClients,
    private readonly opts: AuditWriterOptions,
    private readonly log: Logger,
  ) {
    const full = queueFull(opts.capacity);
    this.queue = new AuditQueue(opts.capacity, (why) =>
      this.drop(why === 'evicted' ? `${full}: the user holding the most lost the newest` : `${full} while the API server is unreachable`),
    );
  }

  /**
   * Queues a call's record; returns at once. false when it was dropped: the writer is stopping, or
   * the queue is full and the call's user holds the most of it (else that user's newest call goes).
   */
  record(entry: AuditEntry): boolean {
    if (this.stopped || !this.queue.add(entry, performance.now())) {
      this.drop(this.stopped ? 'the operator is stopping' : `${queueFull(this.opts.capacity)} and the user holds the most of it`);
      return false;
    }
    this.opts.onQueue?.(this.queue.length);
    this.pump();
    return true;
  }

  /** Calls waiting to be written. */
  get length(): number {
    return this.queue.length;
  }

  /** Writes what is queued, for at most `timeoutMs`; what is left then is dropped (shutdown). */
  async stop(timeoutMs: number): Promise<void> {
    this.flushing = true;
    // Backing off (up to 30 s) would outlast the time to stop, and the API server may answer again
    // by now: what is queued is tried at once (a failure backs off again).
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    this.pump();
    await new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.idle.delete(done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      if (this.queue.length === 0 && this.active === 0) return done();
      this.idle.add(done);
    });
    this.stopped = true;
    clearTimeout(this.retryTimer);
    clearTimeout(this.lingerTimer);
    this.lingerDue = Infinity;
    const left = this.queue.clear();
    for (let i = 0; i < left; i++) this.drop('the operator stopped before it was written');
    // The last line: the drops not yet logged (the process is about to exit, and its metrics with
    // it), and the writes still in flight, whose records may or may not be written.
    clearTimeout(this.dropLogTimer);
    this.dropLogTimer = undefined;
    if (this.dropped > 0 || this.writingCalls > 0) this.logDrops(Date.now());
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
        this.opts.onQueue?.(this.queue.length);
        if (this.queue.length === 0 && this.active === 0) for (const cb of [...this.idle]) cb();
        this.pump();
      });
    }
  }

  /** The calls of the next due session (chooseDue), or undefined; a timer wakes the writer for the next. */
  private takeDue(): { key: string; entries: Queued[] } | undefined {
    const now = performance.now();
    const max = this.opts.maxCallsPerRecord ?? MAX_AUDIT_CALLS;
    const choice = this.queue.takeDue(this.writing, now, this.opts.lingerMs ?? AUDIT_LINGER_MS, max, this.flushing, (user) => this.held(user, now));
    if (choice !== undefined && 'key' in choice) {
      this.writing.add(choice.key);
      // Counted from now until the next count (which sees it in the cache, or its write failed):
      // the writes in flight at once cannot take a user past a cap together.
      const live = this.live?.records;
      if (live) {
        const user = (choice.entries[0] as Queued).entry.owner?.user ?? '';
        live.total++;
        live.byUser.set(user, (live.byUser.get(user) ?? 0) + 1);
      }
      return choice;
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

  /** Whether `user` may not have another record now (recordCaps); counted at most every HELD_RECHECK_MS. */
  private held(user: string, now: number): boolean {
    const capped = this.opts.recordCaps;
    if (!capped) return false;
    if (!this.live || now - this.live.at >= HELD_RECHECK_MS) this.live = { at: now, records: capped.live() };
    return atRecordCap(this.live.records, capped.caps, user);
  }

  private async write(key: string, batch: Queued[]): Promise<void> {
    const calls = batch.length;
    this.writingCalls += calls;
    try {
      await this.create(batch);
      const recorded = await this.patchStatus(batch.map((q) => q.entry));
      this.backoffMs = 0;
      for (let i = 0; i < calls; i++) {
        if (recorded) this.opts.onResult?.('written');
        else this.drop('its record was deleted before its status was written');
      }
    } catch (err) {
      // A full ResourceQuota (count/sandboxruns) frees up as records and runs reach their TTL:
      // dropped at once, every user's calls would go while it is full — whoever filled it.
      if ((retryable(err) || overQuota(err)) && !this.stopped) {
        this.retry(key, batch, err);
        return;
      }
      // The status or class only: the API server's message may quote the record's fields.
      for (let i = 0; i < calls; i++) this.drop(`a write failed with ${failureOf(err)}, which is not retried`);
    } finally {
      this.writingCalls -= calls;
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
    this.queue.putBack(key, keep);
    for (let i = keep.length; i < batch.length; i++) this.drop(`its writes failed for ${limit} ms (the last with ${failureOf(err)})`);
    this.queue.shed();
    this.pause();
    this.log.debug({ failure: failureOf(err) }, 'Failed to write an audit record; retrying');
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

  /**
   * Creates the record of `batch`, named after its first call: a retry after a lost answer finds
   * the record it created (409, and the object is this record). A name taken by anything else — a
   * SandboxRun its user created under it with kubectl: session code can read the call's name from
   * its kernel, and the record waits a second or more — is not written into (the record would be
   * the user's object, its code theirs to choose): the first call is renamed and created again.
   */
  private async create(batch: Queued[]): Promise<void> {
    const first = batch[0] as Queued;
    for (let renamed = false; ; renamed = true) {
      const e = first.entry;
      try {
        await this.clients.custom.createNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          namespace: e.namespace,
          plural: SANDBOXRUN_PLURAL,
          body: auditRunBody(e, this.opts.ttlSecondsAfterFinished),
        });
        return;
      } catch (err) {
        if (statusOf(err) !== 409) throw err;
        if (await this.isRecordOf(e)) return;
        if (renamed) throw err;
        // Kept in the queued call: a retry of this write creates (or finds) the renamed record.
        first.entry = { ...e, name: generateRunName() };
      }
    }
  }

  /** Whether the SandboxRun named `e.name` is the record of `e`: only the gateway can mark one (admission policy). */
  private async isRecordOf(e: AuditEntry): Promise<boolean> {
    const found = (await this.clients.custom.getNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: e.namespace,
      plural: SANDBOXRUN_PLURAL,
      name: e.name,
    })) as { metadata?: { annotations?: Record<string, string> } };
    const a = found.metadata?.annotations ?? {};
    return a[ANNOTATION_EXECUTOR] === AUDIT_EXECUTOR && a[ANNOTATION_CODE_SHA256] === e.codeSha256;
  }

  /** false: the record was deleted meanwhile (its namespace went away, or someone deleted it): nothing is recorded. */
  private async patchStatus(entries: readonly AuditEntry[]): Promise<boolean> {
    const e = entries[0] as AuditEntry;
    try {
      await this.clients.custom.patchNamespacedCustomObjectStatus(
        { group: GROUP, version: VERSION, namespace: e.namespace, plural: SANDBOXRUN_PLURAL, name: e.name, body: { status: auditBatchStatus(entries) } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      return true;
    } catch (err) {
      if (!isNotFound(err)) throw err;
      return false;
    }
  }

  /**
   * Counts a dropped call; logs the drops at most every DROP_LOG_INTERVAL_MS, and the ones counted
   * meanwhile once it has passed (a timer), so that no drop goes unlogged after a burst.
   */
  private drop(why: string): void {
    this.dropped++;
    this.lastDropWhy = why;
    this.opts.onResult?.('dropped');
    const now = Date.now();
    if (now - this.lastDropLog >= DROP_LOG_INTERVAL_MS) return this.logDrops(now);
    if (this.dropLogTimer !== undefined) return;
    this.dropLogTimer = setTimeout(
      () => {
        this.dropLogTimer = undefined;
        if (this.dropped > 0) this.logDrops(Date.now());
      },
      this.lastDropLog + DROP_LOG_INTERVAL_MS - now,
    );
    this.dropLogTimer.unref();
  }

  private logDrops(now: number): void {
    const fields = { dropped: this.dropped, queued: this.queue.length, ...(this.writingCalls > 0 && { writing: this.writingCalls }) };
    if (this.dropped > 0) this.log.warn({ ...fields, why: this.lastDropWhy }, 'Dropped audit records of session calls');
    else this.log.warn(fields, 'Stopped with audit records of session calls still being written');
    this.lastDropLog = now;
    this.dropped = 0;
  }
}
