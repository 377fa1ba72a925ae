// Leader election on a coordination.k8s.io Lease, for work exactly one replica must do (keeping
// the warm pool at its size). Everything else runs on every replica.
import { V1MicroTime, type CoordinationV1Api, type V1Lease } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { isConflict, isNotFound, apiErrorMessage } from '../kube/clients.js';

export interface LeaderOptions {
  namespace: string;
  name: string;
  identity: string;
  leaseDurationSeconds?: number;
  renewEverySeconds?: number;
  onChange?: (leader: boolean) => void;
}

/** Pure: may `identity` take or keep the lease at `now`? */
export function canAcquire(lease: V1Lease | undefined, identity: string, now: Date): boolean {
  const holder = lease?.spec?.holderIdentity;
  if (!holder || holder === identity) return true;
  const renewed = lease?.spec?.renewTime ? new Date(lease.spec.renewTime).getTime() : 0;
  const duration = (lease?.spec?.leaseDurationSeconds ?? 15) * 1000;
  return renewed + duration < now.getTime();
}

export class LeaderElector {
  private timer: NodeJS.Timeout | undefined;
  private leader = false;
  private stopped = false;

  constructor(
    private readonly api: CoordinationV1Api,
    private readonly opts: LeaderOptions,
    private readonly log: Logger,
  ) {}

  get isLeader(): boolean {
    return this.leader;
  }

  start(): void {
    this.stopped = false;
    void this.tick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.leader) {
      // Give the lease up so another replica takes over at once instead of after it expires.
      await this.api
        .patchNamespacedLease({ namespace: this.opts.namespace, name: this.opts.name, body: [{ op: 'replace', path: '/spec/holderIdentity', value: '' }] })
        .catch(() => undefined);
      this.set(false);
    }
  }

  private set(leader: boolean): void {
    if (leader === this.leader) return;
    this.leader = leader;
    this.log.info({ lease: this.opts.name, leader }, leader ? 'Became leader' : 'Lost leadership');
    this.opts.onChange?.(leader);
  }

  private async tick(): Promise<void> {
    try {
      this.set(await this.tryAcquireOrRenew());
    } catch (err) {
      this.log.warn({ err: apiErrorMessage(err) }, 'Leader election failed; retrying');
      this.set(false);
    }
    if (!this.stopped) {
      this.timer = setTimeout(() => void this.tick(), (this.opts.renewEverySeconds ?? 5) * 1000);
      this.timer.unref();
    }
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const { namespace, name, identity } = this.opts;
    const now = new Date();
    const duration = this.opts.leaseDurationSeconds ?? 15;
    let lease: V1Lease | undefined;
    try {
      lease = await this.api.readNamespacedLease({ namespace, name });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    if (!canAcquire(lease, identity, now)) return false;
    const taking = lease?.spec?.holderIdentity !== identity;
    const spec = {
      holderIdentity: identity,
      leaseDurationSeconds: duration,
      renewTime: new V1MicroTime(now.getTime()),
      acquireTime: taking ? new V1MicroTime(now.getTime()) : lease?.spec?.acquireTime,
      leaseTransitions: (lease?.spec?.leaseTransitions ?? 0) + (taking && lease ? 1 : 0),
    };
    try {
      if (!lease) await this.api.createNamespacedLease({ namespace, body: { metadata: { name, namespace }, spec } });
      else await this.api.replaceNamespacedLease({ namespace, name, body: { ...lease, spec } });
      return true;
    } catch (err) {
      if (isConflict(err)) return false; // another replica wrote first
      throw err;
    }
  }
}
