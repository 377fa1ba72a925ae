// Which gateway replicas are alive, so a run whose executor died is failed within a lease duration
// instead of after its whole time budget (run-decision.ts lostAfterMs: start-up allowance + the
// run's timeout + a margin, minutes by default).
//
// Every replica keeps a Lease of its own (label codemode.dev/replica-lease, holder = its identity)
// and renews it every REPLICA_RENEW_MS. Every replica lists those Leases at the same pace and
// judges another replica only by what it observed itself, as client-go's leader election does:
// a replica is gone once this process's own lists, REPLICA_LEASE_SECONDS apart on its own
// monotonic clock, show the same resourceVersion of its Lease (no renewal in between), or once a
// Lease it saw is deleted (a replica that stopped cleanly deletes its own last). Clock skew
// between nodes cannot make a live replica look dead, and an API server this process could not
// reach proves nothing: a failed list judges nobody. A replica never observed (an older version
// without replica Leases, or one that stopped before this process started) is `unknown`: its runs
// keep the time budget.
import { createHash } from 'node:crypto';
import type { CoordinationV1Api, V1Lease } from '@kubernetes/client-node';
import { setHeaderOptions } from '@kubernetes/client-node/dist/middleware.js';
import { PatchStrategy } from '@kubernetes/client-node/dist/patch.js';
import { V1MicroTime } from '@kubernetes/client-node/dist/types.js';
import type { Logger } from 'pino';
import { apiErrorMessage, isConflict, isNotFound } from '../kube/clients.js';
import type { ControllerMetrics } from './metrics.js';

export const REPLICA_LEASE_LABEL = 'codemode.dev/replica-lease';
/** How long a replica's Lease may stay unrenewed, as observed by another replica, before it is gone. */
export const REPLICA_LEASE_SECONDS = 30;
/** Between renewals (and lists): three chances to renew within a lease duration. */
export const REPLICA_RENEW_MS = 10_000;
/** A Lease unrenewed this long belongs to a replica long gone: it is deleted (resourceVersion precondition). */
export const REPLICA_LEASE_GC_MS = 10 * 60_000;
/**
 * Longest wait for one renewal, list or delete: a stalled connection must not hold up the next
 * tick or a shutdown (the request may still finish in the background; a late renewal is harmless).
 */
const CALL_BOUND_MS = 5000;
/** How long stop() waits for a tick in flight before it deletes the Lease. */
const STOP_WAIT_MS = 3000;
/** Deleted Leases remembered (identities of replicas that stopped), oldest forgotten first. */
const MAX_REMEMBERED_GONE = 1000;

export type Liveness = 'alive' | 'gone' | 'unknown';

/** One Lease as this process saw it: its version and when (local monotonic ms) it first saw that version. */
export interface Sighting {
  resourceVersion: string;
  firstSeenMs: number;
}

export interface LivenessView {
  /** Identity → its Lease as last listed. */
  leases: ReadonlyMap<string, Sighting>;
  /** Identities whose Lease this process saw and then saw deleted. */
  deleted: ReadonlySet<string>;
  /** When the last successful list was sent (local monotonic ms); undefined before the first. */
  lastListSentMs: number | undefined;
  /**
   * When the first list of the current run of successful lists was sent; undefined after a failed
   * one. Only time this process could see the API counts: a replica that could not renew while
   * the API server was down is not judged by the outage.
   */
  healthySinceMs: number | undefined;
}

export const EMPTY_VIEW: LivenessView = { leases: new Map(), deleted: new Set(), lastListSentMs: undefined, healthySinceMs: undefined };

/** The replica Lease of an identity: a DNS-1123 name whatever the identity (hostnames run long). */
export function replicaLeaseName(identity: string): string {
  return `codemode-replica-${createHash('sha256').update(identity).digest('hex').slice(0, 16)}`;
}

/**
 * Pure: the view after a successful list sent at `sentMs` and answered at `answeredMs`. A version
 * seen before keeps its first sighting; a new one is first seen at the answer (the renewal that
 * made it happened before then). A Lease that disappeared was deleted.
 */
export function nextView(
  prev: LivenessView,
  listed: readonly { identity: string; resourceVersion: string }[],
  sentMs: number,
  answeredMs: number,
  maxGapMs = Infinity,
): LivenessView {
  const leases = new Map<string, Sighting>();
  for (const l of listed) {
    const before = prev.leases.get(l.identity);
    leases.set(l.identity, before?.resourceVersion === l.resourceVersion ? before : { resourceVersion: l.resourceVersion, firstSeenMs: answeredMs });
  }
  const deleted = new Set([...prev.deleted].filter((id) => !leases.has(id)));
  for (const id of prev.leases.keys()) if (!leases.has(id)) deleted.add(id);
  while (deleted.size > MAX_REMEMBERED_GONE) deleted.delete(deleted.values().next().value as string);
  // A long gap since the last list (this process stalled) breaks the run of lists like a failure.
  const continued = prev.lastListSentMs !== undefined && sentMs - prev.lastListSentMs <= maxGapMs;
  return { leases, deleted, lastListSentMs: sentMs, healthySinceMs: continued ? (prev.healthySinceMs ?? sentMs) : sentMs };
}

/** Pure: the view after a failed list: nothing is judged until lists succeed again for a lease duration. */
export function failedList(prev: LivenessView): LivenessView {
  return { ...prev, healthySinceMs: undefined };
}

/**
 * Pure: is the replica `identity` alive? Gone when its Lease was deleted, or when a list sent at
 * least `durationMs` after this process first saw the Lease's current version — and after its
 * lists started succeeding again — still showed it. Unknown when never seen, or while this
 * process's own lists fail.
 */
export function judge(view: LivenessView, identity: string, durationMs: number): Liveness {
  if (view.deleted.has(identity)) return 'gone';
  const seen = view.leases.get(identity);
  if (seen === undefined || view.lastListSentMs === undefined || view.healthySinceMs === undefined) return 'unknown';
  return view.lastListSentMs - Math.max(seen.firstSeenMs, view.healthySinceMs) >= durationMs ? 'gone' : 'alive';
}

/**
 * Pure: how many replicas are alive in `view` as `self` sees it — itself always (its own Lease may
 * not be listed yet), the others as judged. Replicas never judged (`unknown`) are not counted.
 */
export function aliveCount(view: LivenessView, self: string, durationMs: number): number {
  let n = 1;
  for (const id of view.leases.keys()) if (id !== self && judge(view, id, durationMs) === 'alive') n++;
  return n;
}

/** `p`, or a rejection once `ms` have passed. */
function bounded<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer from the API server within ${ms} ms`)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

export interface ReplicaLivenessOptions {
  namespace: string;
  identity: string;
  /** Told of each replica newly judged gone (e.g. to look at the runs it was executing). */
  onGone?: (identity: string) => void;
  /** Replicas alive after each list, and each one judged gone (released its Lease, or let it expire). */
  metrics?: Pick<ControllerMetrics, 'replicasAlive' | 'replicaGone'>;
  leaseSeconds?: number;
  renewMs?: number;
}

export class ReplicaLiveness {
  private view: LivenessView = EMPTY_VIEW;
  private timer: NodeJS.Timeout | undefined;
  private inflight: Promise<void> | undefined;
  private stopped = true;
  private readonly name: string;
  private readonly durationMs: number;
  private readonly renewMs: number;
  private readonly reported = new Set<string>();

  constructor(
    private readonly api: CoordinationV1Api,
    private readonly opts: ReplicaLivenessOptions,
    private readonly log: Logger,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.name = replicaLeaseName(opts.identity);
    this.durationMs = (opts.leaseSeconds ?? REPLICA_LEASE_SECONDS) * 1000;
    this.renewMs = opts.renewMs ?? REPLICA_RENEW_MS;
  }

  /** The replica that executes (or executed) a run: this process is alive by definition. */
  liveness(identity: string): Liveness {
    if (identity === this.opts.identity) return 'alive';
    return judge(this.view, identity, this.durationMs);
  }

  /** Creates this replica's Lease (best effort: without it others keep the time budget) and starts renewing. */
  async start(): Promise<void> {
    this.stopped = false;
    this.opts.metrics?.replicasAlive(1);
    await this.tick();
  }

  /** Stops renewing and deletes this replica's Lease: others fail its unfinished runs at once. Call last. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    // A tick in flight never rejects (it logs); waiting for it is bounded like every call.
    await bounded(this.inflight ?? Promise.resolve(), STOP_WAIT_MS, 'stop').catch(() => undefined);
    await bounded(this.api.deleteNamespacedLease({ namespace: this.opts.namespace, name: this.name }), CALL_BOUND_MS, 'delete').catch((err: unknown) => {
      if (!isNotFound(err)) this.log.warn({ err: apiErrorMessage(err) }, 'Failed to delete the replica Lease; it expires');
    });
  }

  private tick(): Promise<void> {
    const p = (async () => {
      await this.renew().catch((err: unknown) => this.log.warn({ err: apiErrorMessage(err) }, 'Failed to renew the replica Lease; retrying'));
      await this.observe().catch((err: unknown) => this.log.warn({ err: apiErrorMessage(err) }, 'Failed to list replica Leases; retrying'));
    })().finally(() => {
      if (this.stopped) return;
      this.timer = setTimeout(() => void this.tick(), this.renewMs);
      this.timer.unref();
    });
    this.inflight = p;
    return p;
  }

  private async renew(): Promise<void> {
    const { namespace, identity } = this.opts;
    try {
      await bounded(
        this.api.patchNamespacedLease(
          { namespace, name: this.name, body: { spec: { renewTime: new V1MicroTime(Date.now()) } } },
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        ),
        CALL_BOUND_MS,
        'renew',
      );
    } catch (err) {
      if (!isNotFound(err)) throw err;
      // Stopping: a renewal that outlived stop()'s wait must not bring the deleted Lease back.
      if (this.stopped) return;
      const at = new V1MicroTime(Date.now());
      const body: V1Lease = {
        metadata: { name: this.name, labels: { [REPLICA_LEASE_LABEL]: 'true' } },
        spec: { holderIdentity: identity, leaseDurationSeconds: Math.round(this.durationMs / 1000), acquireTime: at, renewTime: at },
      };
      await bounded(this.api.createNamespacedLease({ namespace, body }), CALL_BOUND_MS, 'create').catch((e: unknown) => {
        if (!isConflict(e)) throw e;
      });
    }
  }

  private async observe(): Promise<void> {
    const sent = this.now();
    let list;
    try {
      list = await bounded(
        this.api.listNamespacedLease({ namespace: this.opts.namespace, labelSelector: `${REPLICA_LEASE_LABEL}=true` }),
        CALL_BOUND_MS,
        'list',
      );
    } catch (err) {
      this.view = failedList(this.view);
      throw err;
    }
    const answered = this.now();
    const listed = list.items.flatMap((l) => {
      const identity = l.spec?.holderIdentity;
      const resourceVersion = l.metadata?.resourceVersion;
      return identity && resourceVersion ? [{ identity, resourceVersion, lease: l }] : [];
    });
    this.view = nextView(this.view, listed, sent, answered, 2 * this.renewMs + 5000);
    for (const id of [...this.view.leases.keys(), ...this.view.deleted]) {
      if (this.liveness(id) !== 'gone') {
        // Renewed again (a partition healed): judged afresh next time.
        this.reported.delete(id);
        continue;
      }
      if (this.reported.has(id)) continue;
      this.reported.add(id);
      const how = this.view.deleted.has(id) ? 'released' : 'expired';
      // Released: an orderly stop (a rolling update); expired: killed, out of memory, its node lost.
      if (how === 'expired') this.log.warn({ replica: id }, 'A gateway replica stopped renewing its Lease; its unfinished runs are failed');
      else this.log.info({ replica: id }, 'A gateway replica stopped and released its Lease');
      this.opts.metrics?.replicaGone(how);
      this.opts.onGone?.(id);
    }
    this.opts.metrics?.replicasAlive(aliveCount(this.view, this.opts.identity, this.durationMs));
    for (const id of this.reported) if (!this.view.deleted.has(id) && !this.view.leases.has(id)) this.reported.delete(id);
    await this.collect(listed, sent);
  }

  /** Deletes Leases of replicas gone for long (each only at the version judged, so a renewal in between wins). */
  private async collect(listed: readonly { identity: string; lease: V1Lease }[], sent: number): Promise<void> {
    for (const { identity, lease } of listed) {
      const seen = this.view.leases.get(identity);
      if (identity === this.opts.identity || seen === undefined || sent - seen.firstSeenMs < REPLICA_LEASE_GC_MS) continue;
      const name = lease.metadata?.name ?? '';
      await this.api
        .deleteNamespacedLease({ namespace: this.opts.namespace, name, body: { preconditions: { resourceVersion: seen.resourceVersion } } })
        .then(() => this.log.info({ replica: identity }, 'Deleted the Lease of a replica gone for long'))
        .catch((err: unknown) => {
          if (!isNotFound(err) && !isConflict(err)) this.log.warn({ err: apiErrorMessage(err) }, 'Failed to delete a stale replica Lease');
        });
    }
  }
}
