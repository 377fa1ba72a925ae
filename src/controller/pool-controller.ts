// The warm-pool controller: exactly one replica (the Lease holder) keeps each profile's pool at the
// size its demand asks for, replaces stale pods, drains a pool whose maximum is 0, deletes the
// unclaimed pods of profiles that are gone, writes each SandboxProfile's pool counts and sweeps old
// runtime ConfigMaps. It owns its work queue (one key: every pool is reconciled in one pass) and
// the leader election; every replica feeds it the pod events it sees, so a new leader already
// knows the recent demand. Claims happen elsewhere (WarmPool.claim), on any replica.
import type { V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { apiErrorMessage, type KubeClients } from '../kube/clients.js';
import type { ControllerMetrics } from './metrics.js';
import type { ResilientInformer } from '../kube/informer.js';
import { LeaderElector } from './leader.js';
import { isWarm, profileOf } from './pool-plan.js';
import { PoolDemand } from './pool-sizing.js';
import type { RuntimeConfigMapGuard } from './runtime-guard.js';
import { sweepRuntimeConfigMaps } from './runtime-sweep.js';
import { deletePoolPod, type WarmPool } from './warm-pool.js';
import { WorkQueue } from './workqueue.js';

export const LEADER_LEASE = 'codemode-operator-leader';
const POOL_KEY = 'pool';
/** While the pool is above its minimum, look again this often: demand decays between events. */
const DECAY_CHECK_MS = 5_000;
/** Old runtime ConfigMaps are looked for at most this often (one list request). */
const SWEEP_PERIOD_MS = 60_000;

/** The pools the leader keeps (src/controller/pool-set.ts), one per profile. */
export interface Pools {
  all(): WarmPool[];
  pool(name: string): WarmPool | undefined;
  /** The built-in profile's pool (hash and target of single-pool callers). */
  readonly main: WarmPool | undefined;
}

export interface PoolControllerDeps {
  pools: Pools;
  pods: ResilientInformer<V1Pod>;
  runtime: RuntimeConfigMapGuard;
  clients: KubeClients;
  namespace: string;
  identity: string;
  resyncMs: number;
  /** The SandboxProfiles (src/profiles ProfileCatalog): the leader writes their status. */
  profiles?: { names(): string[]; writeStatus(name: string, pool: { ready: number; target: number }): Promise<void> };
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
  /** Per profile: survives a pool rebuilt for a changed profile. */
  private readonly demands = new Map<string, PoolDemand>();
  private primed = false;
  private lastSweepMs = 0;
  private readonly now: () => number;

  constructor(private readonly d: PoolControllerDeps) {
    this.now = d.now ?? Date.now;
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
      this.demand(profileOf(p)).observe(p, this.now());
      if (this.elector.isLeader) this.queue.add(POOL_KEY);
    });
    d.pods.onDelete((p) => this.demand(profileOf(p)).forget(p));
  }

  private demand(profile: string): PoolDemand {
    let demand = this.demands.get(profile);
    if (!demand) {
      demand = new PoolDemand((p) => this.d.pools.pool(profile)?.couldServe(p) ?? false);
      if (this.primed) demand.prime();
      this.demands.set(profile, demand);
    }
    return demand;
  }

  /** The pools changed (a profile was added, edited or deleted): the leader looks again. */
  poolsChanged(): void {
    if (this.elector.isLeader) this.queue.add(POOL_KEY);
  }

  get isLeader(): boolean {
    return this.elector.isLeader;
  }

  /** The template hash of this version's pool pods (the built-in profile's pool). */
  get hash(): string {
    return this.d.pools.main?.hash ?? '';
  }

  /** The size the leader aims for now for a pool (default: the built-in profile's). */
  target(nowMs = this.now(), pool: WarmPool | undefined = this.d.pools.main): number {
    if (!pool) return 0;
    return this.demand(pool.name).target({ min: pool.min, max: pool.max }, nowMs, (this.d.refillDeferMs ?? 0) / 1000);
  }

  /** Call once the pod informer has listed: claims seen from now on count as demand. */
  start(): void {
    this.prime();
    this.elector.start();
  }

  /** From now on, claims seen count as demand (start() does it; tests that skip the election too). */
  prime(): void {
    this.primed = true;
    for (const d of this.demands.values()) d.prime();
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
    const nowMs = this.now();
    let requeue = resync;
    let total = 0;
    const counts = new Map<string, { ready: number; target: number }>();
    for (const pool of this.d.pools.all()) {
      const target = this.target(nowMs, pool);
      total += target;
      const again = await pool.refill(target);
      requeue = Math.min(requeue, again ?? resync, target > pool.min ? DECAY_CHECK_MS : resync);
      counts.set(pool.name, { ready: pool.readyPods().length, target });
    }
    this.d.metrics?.poolTarget(total);
    // Every SandboxProfile, also an invalid one (no pool): its status says why it is not usable.
    for (const name of this.d.profiles?.names() ?? []) await this.d.profiles?.writeStatus(name, counts.get(name) ?? { ready: 0, target: 0 });
    await this.deleteOrphans();
    await this.sweep();
    return { requeueAfterMs: requeue };
  }

  /** Unclaimed pods of a profile that no longer exists (a deleted SandboxProfile's go by owner too). */
  private async deleteOrphans(): Promise<void> {
    for (const p of this.d.pods.list(this.d.namespace)) {
      if (isWarm(p) && !this.d.pools.pool(profileOf(p))) await deletePoolPod(this.d.clients, p, 'stale', this.d.log);
    }
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
