// Writes audit records of session calls in the background: record() only queues (no I/O, never
// throws), so a session call gains no API write on its path. Calls of one session are written
// together: a record waits up to `lingerMs` for the calls after it (and while a record of its
// session is being written), then one SandboxRun lists them all (status.calls, at most
// MAX_AUDIT_CALLS) — a create and a status write per record instead of per call, which at a
// session's call rate were half of each call's CPU on a small node (docs/performance.md). The
// queue is bounded: while the API server is unreachable, calls wait and are retried with
// back-off; once the queue is full, new calls are dropped, counted
// (codemode_audit_records_total{result="dropped"}) and logged (counts only). A record that cannot
// be stored (refused by the API server) is dropped the same way.
import { setHeaderOptions } from '@kubernetes/client-node/dist/middleware.js';
import { PatchStrategy } from '@kubernetes/client-node/dist/patch.js';
import type { Logger } from 'pino';
import { GROUP, MAX_AUDIT_CALLS, SANDBOXRUN_PLURAL, VERSION } from '../api/v1alpha1/index.js';
import { apiErrorMessage, isNotFound, statusOf, type KubeClients } from '../kube/clients.js';
import { auditBatchStatus, auditRunBody, type AuditEntry } from './record.js';

/** What happened to a call's record; a closed set (metric label). Counted per call. */
export type AuditResult = 'written' | 'dropped';

/** How long a call waits for the next calls of its session before its record is written. */
export const AUDIT_LINGER_MS = 1000;

export interface AuditWriterOptions {
  /** CODEMODE_AUDIT_QUEUE_LENGTH: calls held waiting to be written. */
  capacity: number;
  /** Records written at once (one per session at a time). */
  concurrency?: number;
  /** How long a call waits for more of its session's calls (AUDIT_LINGER_MS). */
  lingerMs?: number;
  /** Calls per record (MAX_AUDIT_CALLS). */
  maxCallsPerRecord?: number;
  ttlSecondsAfterFinished?: number;
  onResult?(result: AuditResult): void;
  onQueue?(length: number): void;
}

const RETRY_MIN_MS = 500;
const RETRY_MAX_MS = 30_000;
/** Drops are logged at most this often (with how many since the last line). */
const DROP_LOG_INTERVAL_MS = 60_000;

/** Pure: whether a failed write is worth retrying (server or network trouble) or never succeeds. */
export function retryable(status: number | undefined): boolean {
  return status === undefined || status === 429 || status >= 500;
}

/** The calls of one session waiting for their record, oldest first. */
interface Pending {
  entries: AuditEntry[];
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

/** Calls of the same session and owner share records. */
const sessionKey = (e: AuditEntry): string => `${e.namespace}/${e.session}/${e.owner?.user ?? ''}`;

export class AuditWriter {
  /** By session, in the order their oldest call was queued. */
  private readonly pending = new Map<string, Pending>();
  /** Calls queued (in `pending`). */
  private queued = 0;
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

  /** Queues a call's record; returns at once. false when it was dropped (queue full or stopped). */
  record(entry: AuditEntry): boolean {
    if (this.stopped || this.queued >= this.opts.capacity) {
      this.drop(this.stopped ? 'the operator is stopping' : `the queue is full (CODEMODE_AUDIT_QUEUE_LENGTH=${this.opts.capacity})`);
      return false;
    }
    const key = sessionKey(entry);
    const p = this.pending.get(key);
    if (p) p.entries.push(entry);
    else this.pending.set(key, { entries: [entry], since: performance.now() });
    this.queued++;
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
    for (const p of this.pending.values()) for (const _ of p.entries) this.drop('the operator stopped before it was written');
    this.pending.clear();
    this.queued = 0;
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
  private takeDue(): { key: string; entries: AuditEntry[] } | undefined {
    const now = performance.now();
    const max = this.opts.maxCallsPerRecord ?? MAX_AUDIT_CALLS;
    const choice = chooseDue(this.pending, this.writing, now, this.opts.lingerMs ?? AUDIT_LINGER_MS, max, this.flushing);
    if (choice !== undefined && 'take' in choice) {
      const key = choice.take;
      const p = this.pending.get(key) as Pending;
      const entries = p.entries.splice(0, max);
      this.pending.delete(key);
      // The rest start a record of their own (behind the other sessions).
      if (p.entries.length > 0) this.pending.set(key, { entries: p.entries, since: now });
      this.queued -= entries.length;
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

  private async write(key: string, entries: AuditEntry[]): Promise<void> {
    try {
      // Named after its first call: a retry after a lost answer finds the record it created.
      await this.create(entries[0] as AuditEntry);
      await this.patchStatus(entries);
      this.backoffMs = 0;
      for (const _ of entries) this.opts.onResult?.('written');
    } catch (err) {
      if (retryable(statusOf(err)) && !this.stopped) {
        // The API server is unreachable or overloaded: the calls go back first in their session's
        // line, due at once, and all writers pause; the queue bound decides what is dropped meanwhile.
        const p = this.pending.get(key);
        this.pending.delete(key);
        this.pending.set(key, { entries: [...entries, ...(p?.entries ?? [])], since: 0 });
        this.queued += entries.length;
        this.shed(`the queue is full (CODEMODE_AUDIT_QUEUE_LENGTH=${this.opts.capacity}) while the API server is unreachable`);
        this.pause();
        this.log.debug({ err: apiErrorMessage(err) }, 'Failed to write an audit record; retrying');
        return;
      }
      // The status code only: the API server's message may quote the record's fields.
      for (const _ of entries) this.drop(`the API server refused it with HTTP ${statusOf(err) ?? '?'}`);
    }
  }

  /** Back over the bound after a retry: the newest calls go, the oldest stay. */
  private shed(why: string): void {
    const sessions = [...this.pending.values()];
    for (let i = sessions.length - 1; i >= 0 && this.queued > this.opts.capacity; i--) {
      const p = sessions[i] as Pending;
      while (p.entries.length > 0 && this.queued > this.opts.capacity) {
        p.entries.pop();
        this.queued--;
        this.drop(why);
      }
    }
    for (const [key, p] of this.pending) if (p.entries.length === 0) this.pending.delete(key);
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
