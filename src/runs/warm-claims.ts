// Warm pool pods for transient runs: which pool fits a run, and how a pool pod becomes the run's.
// Either this process's reserved pod (no write before the code starts: it is adopted later, see
// useReserved) or a ready pool pod claimed with a patch on the run's path. What is left to do for
// a run's pod (its adoption, the next reservation) is kept until the run's outcome is known.
import type { V1OwnerReference, V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { API_VERSION, LABEL_RUN, LABEL_RUNTIME, SANDBOXRUN_KIND, normalizeLanguage, type SandboxRun } from '../api/v1alpha1/index.js';
import type { Config } from '../config/index.js';
import { apiErrorMessage } from '../kube/clients.js';
import { runLabelValue } from '../sandbox/names.js';
import { POOL_LANGUAGE } from '../sandbox/pod.js';
import { runPodSeconds } from '../sandbox/deadlines.js';

/** The warm pool's claim (src/controller/warm-pool.ts): a ready pool pod patched to belong to a run. */
export interface PoolClaims {
  readonly enabled: boolean;
  claim(owner: V1OwnerReference, labels: Record<string, string>, deadlineFromNowSeconds: number): Promise<V1Pod | undefined>;
  /** This process's reserved pod for one run, if it can run code now (src/controller/pool-reservation.ts). */
  takeReserved(): Promise<V1Pod | undefined>;
  /** Makes a reserved pod the run's (labels, owner, deadline): with the Running status, or after the outcome. */
  adopt(pod: V1Pod, owner: V1OwnerReference, labels: Record<string, string>, deadlineFromNowSeconds: number): Promise<void>;
  /** Reserves a pod for the next warm run, in the background. */
  ensureReserved(): void;
}

/** The warm pools by profile (src/controller/pool-set.ts). */
export interface ProfilePools {
  pool(profile: string): PoolClaims | undefined;
}

/** What a run's pool pod still needs once the run has an outcome. */
export interface Adoption {
  /** Labels the reserved pod with its run (once, however often called); absent for a claimed pod. */
  adopt?: () => Promise<void>;
  /** The adoption if it was started (the run outlived the Running write's delay), else undefined. */
  adopting?: () => Promise<void> | undefined;
  /** The pool that reserves the next run's pod. */
  pool: Pick<PoolClaims, 'ensureReserved'>;
}

/** The settings a claim reads: the run's profile's images and pod start-up limit. */
export type ClaimOptions = Pick<Config, 'images' | 'podStartupTimeoutSeconds'>;

export interface ClaimTerms {
  owner: V1OwnerReference;
  labels: Record<string, string>;
  /** Seconds from now after which the pool deletes the pod if it is still there. */
  deadline: number;
}

/** Pure: what makes a pool pod the run's: the run as its controlling owner, its labels and deadline. */
export function claimTerms(run: Pick<SandboxRun, 'metadata' | 'spec'>, opts: Pick<ClaimOptions, 'podStartupTimeoutSeconds'>): ClaimTerms {
  return {
    owner: {
      apiVersion: API_VERSION,
      kind: SANDBOXRUN_KIND,
      name: run.metadata.name,
      uid: run.metadata.uid ?? '',
      controller: true,
      blockOwnerDeletion: true,
    },
    labels: { [LABEL_RUN]: runLabelValue(run.metadata.name), [LABEL_RUNTIME]: normalizeLanguage(run.spec.language) },
    deadline: runPodSeconds(opts.podStartupTimeoutSeconds, run.spec.timeoutSeconds),
  };
}

export class WarmClaims {
  private pools: ProfilePools | undefined;
  private readonly adoptions = new Map<string, Adoption>();

  constructor(private readonly log: Logger) {}

  setPools(pools: ProfilePools): void {
    this.pools = pools;
  }

  /** The run's warm pool, if its pods fit the run (same image, default limits). */
  poolFor(run: SandboxRun, profile: string, opts: ClaimOptions): PoolClaims | undefined {
    const pool = this.pools?.pool(profile);
    if (!pool?.enabled || run.spec.resources || opts.images[normalizeLanguage(run.spec.language)] !== opts.images[POOL_LANGUAGE]) return undefined;
    return pool;
  }

  /**
   * This process's reserved pod becomes the run's: no pod write before the code starts. The patch
   * that makes the pod the run's goes out with the Running status, for code still executing after
   * a short delay; the outcome is recorded only after it (executor.ts, settle). A run that ends
   * before has its pod deleted once its outcome is stored, never relabelled: every label change
   * of a pod costs the node a NetworkPolicy resync (kube-router: ~50 ms of CPU), and until the
   * outcome is stored the reservation (its annotation) and the run's executor tie the two (run-decision.ts).
   */
  useReserved(run: SandboxRun, pool: PoolClaims, reserved: V1Pod, opts: ClaimOptions): void {
    const { owner, labels, deadline } = claimTerms(run, opts);
    let adoption: Promise<void> | undefined;
    const adopt = (): Promise<void> =>
      (adoption ??= pool
        .adopt(reserved, owner, labels, deadline)
        .catch((err: unknown) =>
          this.log.warn({ pod: reserved.metadata?.name, err: apiErrorMessage(err) }, 'Failed to label a reserved pool Pod with its run'),
        ));
    this.adoptions.set(run.metadata.uid ?? '', { adopt, adopting: () => adoption, pool });
  }

  /** A warm pod of the run's profile, if its pool has one that fits: its name. */
  async claim(run: SandboxRun, profile: string, opts: ClaimOptions): Promise<string | undefined> {
    const pool = this.poolFor(run, profile, opts);
    if (!pool) return undefined;
    const reserved = await pool.takeReserved();
    if (reserved) {
      this.useReserved(run, pool, reserved, opts);
      return reserved.metadata?.name;
    }
    const { owner, labels, deadline } = claimTerms(run, opts);
    const pod = await pool.claim(owner, labels, deadline);
    // None was reserved (this process's first warm run, or calls overlapping): once this run has
    // its outcome, reserve one for the next (not now: the pool's refill would compete with the run).
    if (pod) this.adoptions.set(run.metadata.uid ?? '', { pool });
    return pod?.metadata?.name;
  }

  /** What the run's pool pod still needs, handed over once (to the run's execution). */
  take(uid: string): Adoption | undefined {
    const adoption = this.adoptions.get(uid);
    this.adoptions.delete(uid);
    return adoption;
  }

  /** The run has ended: nothing of its pool pod is kept. */
  forget(uid: string): void {
    this.adoptions.delete(uid);
  }
}
