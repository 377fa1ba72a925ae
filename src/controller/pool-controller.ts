// The warm-pool controller: exactly one replica (the Lease holder) keeps the pool at the size
// demand asks for, replaces stale pods, drains the pool when its maximum is 0 and sweeps old
// runtime ConfigMaps. It owns its work queue (one key: the whole pool is reconciled at once) and
// the leader election; every replica feeds it the pod events it sees, so a new leader already
// knows the recent demand. Claims happen elsewhere (WarmPool.claim), on any replica.
import type { V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { apiErrorMessage, type KubeClients } from '../kube/clients.js';
import type { ControllerMetrics } from './metrics.js';
import type { ResilientInformer } from '../kube/informer.js';
import { LeaderElector } from './leader.js';
import { PoolDemand } from './pool-sizing.js';
import type { RuntimeConfigMapGuard } from './runtime-guard.js';
import { sweepRuntimeConfigMaps } from './runtime-sweep.js';
import type { WarmPool } from './warm-pool.js';
import { WorkQueue } from './workqueue.js';

export const LEADER_LEASE = 'codemode-operator-leader';
const POOL_KEY = 'pool';
/** While the pool is above its minimum, look again this often: demand decays between events. */
const DECAY_CHECK_MS = 5_000;
/** Old runtime ConfigMaps are looked for at most this often (one list request). */
const SWEEP_PERIOD_MS = 60_000;

export interface PoolControllerDeps {
  pool: WarmPool;
  pods: ResilientInformer<V1Pod>;
  runtime: RuntimeConfigMapGuard;
  clients: KubeClients;
  namespace: string;
  identity: string;
  min: number;
  max: number;
  resyncMs: number;
  /** The pool's refill deferral: part of the time a claimed pod's replacement takes. */
  refillDeferMs?: number;
  log: Logger;
  metrics?: ControllerMetrics;
  /** The clock demand, expiry and the sweep are judged by (tests fix it); Date.now by default. */
  now?: () => number;
}

export class PoolController {
  private readonly queue: WorkQueue;
  private readonly elector: LeaderElector;
  private readonly demand: PoolDemand;
  private lastSweepMs = 0;
  private readonly now: () => number;

  constructor(private readonly d: PoolControllerDeps) {
    this.now = d.now ?? Date.now;
    this.demand = new PoolDemand((p) => d.pool.couldServe(p));
    this.queue = new WorkQueue(() => (this.elector.isLeader ? this.reconcile() : Promise.resolve({ requeueAfterMs: d.resyncMs })), {
      workers: 1,
      metrics: d.metrics?.queue('warmpool'),
    });
    this.elector = new LeaderElector(
      d.clients.coordination,
      {
        namespace: d.namespace,
        name: LEADER_LEASE,
        identity: d.identity,
        onChange: (leader) => {
          d.metrics?.leader(leader);
          if (!leader) d.metrics?.poolTarget(0);
          if (leader) this.queue.add(POOL_KEY);
        },
      },
      d.log.child({ component: 'leader-election' }),
    );
    d.pods.onChange((p) => {
      this.demand.observe(p, this.now());
      if (this.elector.isLeader) this.queue.add(POOL_KEY);
    });
    d.pods.onDelete((p) => this.demand.forget(p));
  }

  get isLeader(): boolean {
    return this.elector.isLeader;
  }

  /** The template hash of this version's pool pods. */
  get hash(): string {
    return this.d.pool.hash;
  }

  /** The pool size the leader aims for now. */
  target(nowMs = this.now()): number {
    return this.demand.target(this.d, nowMs, (this.d.refillDeferMs ?? 0) / 1000);
  }

  /** Call once the pod informer has listed: claims seen from now on count as demand. */
  start(): void {
    this.prime();
    this.elector.start();
  }

  /** From now on, claims seen count as demand (start() does it; tests that skip the election too). */
  prime(): void {
    this.demand.prime();
  }

  async stop(): Promise<void> {
    this.queue.stop();
    await this.elector.stop();
  }

  /**
   * One pass over the whole pool, as the leader makes it: the work queue calls it only while this
   * replica holds the Lease; tests call it directly, without an election.
   */
  async reconcile(): Promise<{ requeueAfterMs: number }> {
    const resync = this.d.resyncMs;
    const target = this.target();
    this.d.metrics?.poolTarget(target);
    const again = await this.d.pool.refill(target);
    await this.sweep();
    const decaying = target > this.d.min ? DECAY_CHECK_MS : resync;
    return { requeueAfterMs: Math.min(again ?? resync, decaying) };
  }

  private async sweep(): Promise<void> {
    const now = this.now();
    if (now - this.lastSweepMs < SWEEP_PERIOD_MS) return;
    this.lastSweepMs = now;
    await sweepRuntimeConfigMaps(this.d.clients, this.d.namespace, this.d.runtime.name, this.d.pods.list(this.d.namespace), this.d.log, now).catch(
      (err: unknown) => this.d.log.warn({ err: apiErrorMessage(err) }, 'Failed to sweep runtime ConfigMaps'),
    );
  }
}
