// Writes audit records of session calls in the background: record() only queues (no I/O, never
// throws), so a session call gains no API write on its path. The queue is bounded: while the API
// server is unreachable, entries wait and are retried with back-off; once the queue is full, new
// entries are dropped, counted (codemode_audit_records_total{result="dropped"}) and logged (counts
// only). A record that cannot be stored (refused by the API server) is dropped the same way.
import { setHeaderOptions } from '@kubernetes/client-node/dist/middleware.js';
import { PatchStrategy } from '@kubernetes/client-node/dist/patch.js';
import type { Logger } from 'pino';
import { GROUP, SANDBOXRUN_PLURAL, VERSION } from '../api/v1alpha1/index.js';
import { apiErrorMessage, isNotFound, statusOf, type KubeClients } from '../kube/clients.js';
import { auditRunBody, auditStatus, type AuditEntry } from './record.js';

/** What happened to a record; a closed set (metric label). */
export type AuditResult = 'written' | 'dropped';

export interface AuditWriterOptions {
  /** CODEMODE_AUDIT_QUEUE_LENGTH: entries held waiting to be written. */
  capacity: number;
  /** Records written at once. */
  concurrency?: number;
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

export class AuditWriter {
  private readonly queue: AuditEntry[] = [];
  private active = 0;
  private backoffMs = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private dropped = 0;
  private lastDropLog = 0;
  private readonly idle = new Set<() => void>();
  private stopped = false;

  constructor(
    private readonly clients: KubeClients,
    private readonly opts: AuditWriterOptions,
    private readonly log: Logger,
  ) {}

  /** Queues a record; returns at once. false when it was dropped (queue full or stopped). */
  record(entry: AuditEntry): boolean {
    if (this.stopped || this.queue.length >= this.opts.capacity) {
      this.drop(this.stopped ? 'the operator is stopping' : `the queue is full (CODEMODE_AUDIT_QUEUE_LENGTH=${this.opts.capacity})`);
      return false;
    }
    this.queue.push(entry);
    this.opts.onQueue?.(this.queue.length);
    this.pump();
    return true;
  }

  get length(): number {
    return this.queue.length;
  }

  /** Writes what is queued, for at most `timeoutMs`; what is left then is dropped (shutdown). */
  async stop(timeoutMs: number): Promise<void> {
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
    while (this.queue.length > 0) {
      this.queue.shift();
      this.drop('the operator stopped before it was written');
    }
  }

  private pump(): void {
    const concurrency = this.opts.concurrency ?? 4;
    while (!this.stopped && this.retryTimer === undefined && this.active < concurrency && this.queue.length > 0) {
      const entry = this.queue.shift() as AuditEntry;
      this.active++;
      void this.write(entry).finally(() => {
        this.active--;
        this.opts.onQueue?.(this.queue.length);
        if (this.queue.length === 0 && this.active === 0) for (const cb of [...this.idle]) cb();
        this.pump();
      });
    }
  }

  private async write(entry: AuditEntry): Promise<void> {
    try {
      await this.create(entry);
      await this.patchStatus(entry);
      this.backoffMs = 0;
      this.opts.onResult?.('written');
    } catch (err) {
      if (retryable(statusOf(err)) && !this.stopped) {
        // The API server is unreachable or overloaded: keep the entry first in line and pause all
        // writers; the queue bound decides what is dropped meanwhile.
        this.queue.unshift(entry);
        // Back in line, the oldest stay: the bound holds for what came since (the newest go).
        while (this.queue.length > this.opts.capacity) {
          this.queue.pop();
          this.drop(`the queue is full (CODEMODE_AUDIT_QUEUE_LENGTH=${this.opts.capacity}) while the API server is unreachable`);
        }
        this.pause();
        this.log.debug({ err: apiErrorMessage(err) }, 'Failed to write an audit record; retrying');
        return;
      }
      // The status code only: the API server's message may quote the record's fields.
      this.drop(`the API server refused it with HTTP ${statusOf(err) ?? '?'}`);
    }
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

  private async patchStatus(e: AuditEntry): Promise<void> {
    try {
      await this.clients.custom.patchNamespacedCustomObjectStatus(
        { group: GROUP, version: VERSION, namespace: e.namespace, plural: SANDBOXRUN_PLURAL, name: e.name, body: { status: auditStatus(e) } },
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
    this.log.warn({ dropped: this.dropped, queued: this.queue.length, why }, 'Dropped audit records of session calls');
    this.lastDropLog = now;
    this.dropped = 0;
  }
}
