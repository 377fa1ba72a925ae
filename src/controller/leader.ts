// Leader election on a coordination.k8s.io Lease, for work exactly one replica must do (keeping
// the warm pool at its size). Everything else runs on every replica.
//
// As client-go does it: a lease is judged by when THIS process last saw its record change (its
// own monotonic clock), never by comparing the holder's renewTime (the holder's wall clock) with
// ours, so clock skew between nodes cannot make two replicas leaders at once. A leader that cannot
// renew within the renew deadline (shorter than the lease) stops leading before anyone else may
// take over.
import type { CoordinationV1Api, V1Lease } from '@kubernetes/client-node';
import { V1MicroTime } from '@kubernetes/client-node/dist/types.js';
import type { Logger } from 'pino';
import { isConflict, isNotFound, apiErrorMessage } from '../kube/clients.js';

export interface LeaderOptions {
  namespace: string;
  name: string;
  identity: string;
  /** How long others wait after they last saw the record change (client-go default 15 s). */
  leaseDurationSeconds?: number;
  /** A leader that has not renewed for this long steps down (client-go default 10 s). */
  renewDeadlineSeconds?: number;
  /** Between attempts, leader or not (client-go default 2 s). */
  retryPeriodSeconds?: number;
  onChange?: (leader: boolean) => void;
}

/** The lease record as this process last saw it, and when (monotonic ms). */
export interface Observation {
  record: string;
  atMs: number;
}

function recordOf(lease: V1Lease | undefined): string {
  const s = lease?.spec;
  const time = (t: unknown): string => (t instanceof Date ? t.toISOString() : String(t ?? ''));
  return [s?.holderIdentity ?? '', s?.leaseDurationSeconds ?? '', time(s?.acquireTime), time(s?.renewTime), s?.leaseTransitions ?? ''].join('|');
}

/** Pure: the new observation after reading `lease` at local time `nowMs`. */
export function observe(prev: Observation | undefined, lease: V1Lease | undefined, nowMs: number): Observation {
  const record = recordOf(lease);
  return prev && prev.record === record ? prev : { record, atMs: nowMs };
}

/**
 * Pure: may `identity` take or keep the lease at local time `nowMs`? Free or ours: yes. Held by
 * another: only once its record has not changed for a whole lease duration of our own clock.
 */
export function canAcquire(lease: V1Lease | undefined, identity: string, seen: Observation, nowMs: number): boolean {
  const holder = lease?.spec?.holderIdentity;
  if (!holder || holder === identity) return true;
  const duration = (lease?.spec?.leaseDurationSeconds ?? 15) * 1000;
  return seen.atMs + duration <= nowMs;
}

/** Pure: a leader whose last successful renewal is older than the deadline must step down. */
export function pastRenewDeadline(lastRenewMs: number | undefined, nowMs: number, renewDeadlineMs: number): boolean {
  return lastRenewMs === undefined || nowMs - lastRenewMs >= renewDeadlineMs;
}

export class LeaderElector {
  private timer: NodeJS.Timeout | undefined;
  private inflight: Promise<void> | undefined;
  private leader = false;
  private stopped = false;
  private seen: Observation | undefined;
  private lastRenewMs: number | undefined;
  private readonly durationS: number;
  private readonly deadlineMs: number;
  private readonly retryMs: number;

  constructor(
    private readonly api: CoordinationV1Api,
    private readonly opts: LeaderOptions,
    private readonly log: Logger,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.durationS = opts.leaseDurationSeconds ?? 15;
    this.deadlineMs = Math.min((opts.renewDeadlineSeconds ?? 10) * 1000, this.durationS * 1000 - 1000);
    this.retryMs = (opts.retryPeriodSeconds ?? 2) * 1000;
  }

  get isLeader(): boolean {
    return this.leader;
  }

  start(): void {
    this.stopped = false;
    this.inflight = this.tick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    // A renewal in flight may take the lease again: wait for it, so what it took is released.
    // Bounded: a stalled API server must not hold up a shutdown (the lease then just expires).
    let bound: NodeJS.Timeout | undefined;
    await Promise.race([this.inflight, new Promise<void>((r) => (bound = setTimeout(r, this.retryMs + 3000)))]);
    clearTimeout(bound);
    if (this.leader) {
      this.set(false);
      // Give the lease up so another replica takes over at once instead of after it expires; only
      // if it is still ours (the resourceVersion guards against releasing someone else's).
      const { namespace, name, identity } = this.opts;
      const lease = await this.api.readNamespacedLease({ namespace, name }).catch(() => undefined);
      if (lease?.spec?.holderIdentity === identity) {
        await this.api
          .replaceNamespacedLease({
            namespace,
            name,
            body: { ...lease, spec: { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1, renewTime: new V1MicroTime(Date.now()) } },
          })
          .catch(() => undefined);
      }
    }
  }

  private set(leader: boolean): void {
    if (leader === this.leader) return;
    this.leader = leader;
    this.log.info({ lease: this.opts.name, leader }, leader ? 'Became leader' : 'Lost leadership');
    this.opts.onChange?.(leader);
  }

  private async tick(): Promise<void> {
    let renewed = false;
    try {
      renewed = await this.tryAcquireOrRenew();
    } catch (err) {
      this.log.warn({ err: apiErrorMessage(err) }, 'Leader election failed; retrying');
    }
    if (renewed) this.lastRenewMs = this.now();
    if (this.stopped) {
      // Stopping: no "Became leader" any more, but stop() must release a lease just renewed.
      if (renewed) this.leader = true;
      return;
    }
    // A failed renewal keeps leadership until the deadline: a brief API hiccup must not stop the
    // leader's work, but nobody else can take over before our lease has expired for them.
    if (renewed) this.set(true);
    else if (!this.leader || pastRenewDeadline(this.lastRenewMs, this.now(), this.deadlineMs)) this.set(false);
    if (!this.stopped) {
      this.timer = setTimeout(() => {
        this.inflight = this.tick();
      }, this.retryMs);
      this.timer.unref();
    }
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const { namespace, name, identity } = this.opts;
    let lease: V1Lease | undefined;
    try {
      lease = await this.api.readNamespacedLease({ namespace, name });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    this.seen = observe(this.seen, lease, this.now());
    if (!canAcquire(lease, identity, this.seen, this.now())) return false;
    const taking = lease?.spec?.holderIdentity !== identity;
    const wall = Date.now();
    const spec = {
      holderIdentity: identity,
      leaseDurationSeconds: this.durationS,
      renewTime: new V1MicroTime(wall),
      acquireTime: taking ? new V1MicroTime(wall) : lease?.spec?.acquireTime,
      leaseTransitions: (lease?.spec?.leaseTransitions ?? 0) + (taking && lease ? 1 : 0),
    };
    try {
      // The read's resourceVersion makes the write conditional: two replicas cannot both take it.
      if (!lease) await this.api.createNamespacedLease({ namespace, body: { metadata: { name, namespace }, spec } });
      else await this.api.replaceNamespacedLease({ namespace, name, body: { ...lease, spec } });
      return true;
    } catch (err) {
      if (isConflict(err)) return false; // another replica wrote first
      throw err;
    }
  }
}
