// The warm pools of every profile: one WarmPool per usable profile (a profile whose pool maximum
// is 0 keeps one too, so its pods drain), rebuilt when the profile changes — a changed profile
// builds pods of another hash, so its old pods are replaced, never served. Any replica claims from
// it; the leader's PoolController refills it. This process also opens a kernel stream to every
// ready pool pod of a current version ahead of any claim, so a claim pays no exec set-up (~60 ms).
import type { V1Pod } from '@kubernetes/client-node';
import { BUILTIN_PROFILE } from '../api/v1alpha1/index.js';
import type { KernelConnections } from '../exec/kernel.js';
import { apiErrorMessage } from '../kube/clients.js';
import type { ResolvedProfile } from '../profiles/profile.js';
import { POOL_LANGUAGE, SANDBOX_CONTAINER } from '../sandbox/pod.js';
import { podState } from '../sandbox/pod-state.js';
import { profileOf } from './pool-plan.js';
import { WarmPool, type WarmPoolDeps } from './warm-pool.js';

export interface PoolSetDeps extends Omit<WarmPoolDeps, 'profile' | 'min' | 'max'> {
  /** The usable profiles (src/profiles ProfileCatalog). */
  profiles: { all(): ResolvedProfile[] };
  /** False when this version has no kernels: every pool is drained. */
  kernelsAvailable: boolean;
  kernels?: KernelConnections;
}

export class PoolSet {
  private pools = new Map<string, WarmPool>();

  constructor(private readonly d: PoolSetDeps) {
    this.sync();
    const kernels = d.kernels;
    d.pods.onChange((p) => {
      const ns = p.metadata?.namespace;
      const name = p.metadata?.name;
      if (ns !== d.opts.namespace || !name) return;
      const pool = this.pools.get(profileOf(p));
      // Claims waiting for a starting pod look again (it may be ready, or gone).
      pool?.podChanged();
      if (!kernels || podState(p).kind !== 'ready' || !pool?.enabled || !pool.isCurrent(p)) return;
      kernels
        .get(ns, name, SANDBOX_CONTAINER, POOL_LANGUAGE)
        .catch((err: unknown) => d.log.debug({ pod: name, err: apiErrorMessage(err) }, 'Could not connect to a pool pod yet'));
    });
    d.pods.onDelete((p) => {
      if (kernels && p.metadata?.namespace && p.metadata.name) kernels.drop(p.metadata.namespace, p.metadata.name);
    });
  }

  /** Follows the profiles: a pool per profile, rebuilt when its pods would differ. */
  sync(): void {
    const next = new Map<string, WarmPool>();
    for (const profile of this.d.profiles.all()) {
      const min = this.d.kernelsAvailable ? profile.pool.min : 0;
      const max = this.d.kernelsAvailable ? profile.pool.max : 0;
      const old = this.pools.get(profile.name);
      const fresh = new WarmPool({ ...this.d, profile, min, max, preferred: (p) => this.warmedUp(p) });
      const kept = old && old.hash === fresh.hash && old.min === min && old.max === max ? old : fresh;
      next.set(profile.name, kept);
      if (old && kept !== old) void old.retire(kept);
    }
    for (const [name, old] of this.pools) if (!next.has(name)) void old.retire(undefined);
    this.pools = next;
  }

  /** This process reached the pod's kernel already (its pre-imports are done). */
  private warmedUp(p: V1Pod): boolean {
    const ns = p.metadata?.namespace;
    const name = p.metadata?.name;
    return this.d.kernels !== undefined && ns !== undefined && name !== undefined && this.d.kernels.isOpen(ns, name);
  }

  /** The pool of profile `name` (undefined: no such profile). */
  pool(name: string): WarmPool | undefined {
    return this.pools.get(name);
  }

  all(): WarmPool[] {
    return [...this.pools.values()];
  }

  /** The built-in (or default-named) profile's pool: what older single-pool callers mean. */
  get main(): WarmPool | undefined {
    return this.pools.get(BUILTIN_PROFILE) ?? this.all()[0];
  }

  /** Gives up this process's reserved pods (shutdown). */
  async releaseAll(): Promise<void> {
    await Promise.allSettled(this.all().map((p) => p.releaseReservation()));
  }

  /** Ready, unclaimed pods of every pool. */
  readyPods(): V1Pod[] {
    return this.all().flatMap((p) => p.readyPods());
  }
}
