// One ready pool pod a gateway process keeps for itself, so its next warm run skips the claim
// patch (~19 ms, most of a warm run's API time). The reservation is the claim made ahead of time,
// off any caller's path: the same patch guarded by resourceVersion, so across replicas a pod is
// still taken by exactly one — it annotates the pod (`codemode.dev/reserved-by`, a hash of this
// process's identity; its labels stay `pool=warm`, since every label change of a pod makes the
// node's NetworkPolicy controller resync its rules) and lowers its deadline so a reservation left
// by a process that died ends by itself (the leader deletes the failed pod, pool-plan.ts). Inside
// the process the reservation is handed to one run at a time (take); the patch making the pod
// the run's (WarmPool adopt) goes with the Running status, never before the code starts, and a
// shorter run's pod is deleted without it (src/runs/warm-claims.ts). Exactly-once does not rest
// on that patch: a run carries its executor's identity from its creation, no other process ever
// starts it, and this one holds it as busy until its outcome is stored (run-decision.ts).
import { createHash } from 'node:crypto';
import type { V1Pod } from '@kubernetes/client-node';
import { setHeaderOptions } from '@kubernetes/client-node/dist/middleware.js';
import { PatchStrategy } from '@kubernetes/client-node/dist/patch.js';
import type { Logger } from 'pino';
import { ANNOTATION_RESERVED_BY } from '../api/v1alpha1/index.js';
import { apiErrorMessage, isConflict, isNotFound, statusOf, type KubeClients } from '../kube/clients.js';
import type { ResilientInformer } from '../kube/informer.js';
import { LABEL_POOL_HASH } from '../sandbox/pod.js';
import { podState } from '../sandbox/pod-state.js';

/** A reservation is handed to a run only this long after it was made (then replaced). */
export const RESERVE_TTL_SECONDS = 300;

/** The value naming a process: its identity hashed (short, and the same length for every identity). */
export function reservationMark(identity: string): string {
  return createHash('sha256').update(identity).digest('hex').slice(0, 16);
}

export interface ReservationDeps {
  clients: KubeClients;
  pods: ResilientInformer<V1Pod>;
  namespace: string;
  identity: string;
  log: Logger;
  /** The pool's version: a reserved pod of another hash is never handed out. */
  hash: string;
  /** Ready, unclaimed pods of this pool's version, best first (the claim's order). */
  candidates(): V1Pod[];
  /** Seconds a reserved pod must stay usable past RESERVE_TTL_SECONDS: the longest transient run. */
  longestRunSeconds: number;
  now?: () => number;
}

const MERGE = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

export class PoolReservation {
  private held: { name: string; uid: string; at: number } | undefined;
  private reserving: Promise<void> | undefined;
  private closed = false;
  /** A reservation was asked for (after a warm run): one is made whenever none is held. */
  private wanted = false;
  /** A run executes in the pod taken last: reserving now would start a refill beside it. */
  private inUse = false;
  private readonly mark: string;
  private readonly now: () => number;

  constructor(private readonly d: ReservationDeps) {
    this.mark = reservationMark(d.identity);
    this.now = d.now ?? Date.now;
  }

  /** Reserves a pod in the background unless one is held or on its way. Never throws. */
  ensure(): void {
    this.inUse = false;
    this.wanted = true;
    if (this.closed || this.held || this.reserving) return;
    this.reserving = this.reserve()
      .catch((err: unknown) => this.d.log.debug({ err: apiErrorMessage(err) }, 'Could not reserve a pool pod'))
      .finally(() => {
        this.reserving = undefined;
      });
  }

  private async reserve(): Promise<void> {
    for (const pod of this.d.candidates()) {
      const started = pod.status?.startTime ? new Date(pod.status.startTime).getTime() : this.now();
      const age = Math.max(0, Math.ceil((this.now() - started) / 1000));
      try {
        const got = await this.d.clients.core.patchNamespacedPod(
          {
            namespace: this.d.namespace,
            name: pod.metadata?.name ?? '',
            body: {
              metadata: { resourceVersion: pod.metadata?.resourceVersion, annotations: { [ANNOTATION_RESERVED_BY]: this.mark } },
              spec: { activeDeadlineSeconds: age + RESERVE_TTL_SECONDS + this.d.longestRunSeconds },
            },
          },
          MERGE,
        );
        const held = { name: got.metadata?.name ?? '', uid: got.metadata?.uid ?? '', at: this.now() };
        if (this.closed) await this.remove(held);
        else this.held = held;
        return;
      } catch (err) {
        // Taken or gone meanwhile, or too old for the deadline (the API only lowers it): next one.
        if (isConflict(err) || isNotFound(err) || statusOf(err) === 422) continue;
        throw err;
      }
    }
  }

  /**
   * One of the pool's pods changed (one may have become ready): a reservation asked for when none
   * was ready is made now, unless a run is executing in the last one taken (its end asks again).
   */
  retry(): void {
    if (this.wanted && !this.inUse) this.ensure();
  }

  /** A reservation being made now, if any: a run can wait for it rather than claim another pod. */
  inFlight(): Promise<void> | undefined {
    return this.reserving;
  }

  /**
   * The reserved pod, handed to the caller (one run) when it can run code now: ready, of this
   * version, reserved by this process, and fresh; otherwise it is deleted and undefined returned.
   */
  take(): V1Pod | undefined {
    const h = this.held;
    if (!h) return undefined;
    this.held = undefined;
    this.inUse = true;
    // The cache may not show the reservation's own patch yet (a call right after it): the pod is
    // ours since the patch succeeded; what the cache must show is that the pod is still there
    // and ready.
    const pod = this.d.pods.get(h.name, this.d.namespace);
    const usable =
      pod !== undefined &&
      pod.metadata?.uid === h.uid &&
      !pod.metadata.deletionTimestamp &&
      pod.metadata.labels?.[LABEL_POOL_HASH] === this.d.hash &&
      podState(pod).kind === 'ready' &&
      this.now() - h.at < RESERVE_TTL_SECONDS * 1000;
    if (usable) return pod;
    void this.remove(h);
    return undefined;
  }

  /** Gives the reservation up (shutdown, a pool rebuilt): the pod is deleted, being nobody's. */
  async release(): Promise<void> {
    this.closed = true;
    await this.reserving;
    const h = this.held;
    this.held = undefined;
    if (h) await this.remove(h);
  }

  private async remove(h: { name: string; uid: string }): Promise<void> {
    try {
      await this.d.clients.core.deleteNamespacedPod({
        namespace: this.d.namespace,
        name: h.name,
        gracePeriodSeconds: 0,
        body: { preconditions: { uid: h.uid } },
      });
    } catch (err) {
      if (!isNotFound(err) && !isConflict(err))
        this.d.log.warn({ pod: h.name, err: apiErrorMessage(err) }, 'Failed to delete a reserved pool Pod (its deadline ends it)');
    }
  }
}
