// What the controllers report to the metrics registry (src/metrics implements it): the controllers
// depend on this port, never on the registry, so metrics can depend on them without a cycle.
import type { QueueMetrics } from './workqueue.js';

export interface ControllerMetrics {
  queue(controller: string): QueueMetrics;
  reconcile(controller: string, result: 'success' | 'error' | 'requeue_after', seconds: number): void;
  sessionCollected(cause: 'idle' | 'lifetime'): void;
  /** The leader's demand-sized pool target (0 on other replicas). */
  poolTarget(pods: number): void;
  leader(isLeader: boolean): void;
  /** A session's own pod: creation to Ready (a warm claim is timed by the pool). */
  podStarted(start: 'warm' | 'cold', seconds: number): void;
  /**
   * A run whose executor stopped before it recorded the outcome, ended here: with the outcome read
   * back from its pod, or Failed (ExecFailed). Its executor never counted its end, so this replica
   * does (phase and reason: the API's closed sets; runtime: a closed set).
   */
  orphanEnded(phase: string, reason: string, runtime: string): void;
  /** Gateway replicas this process sees renewing their replica Lease (itself included). */
  replicasAlive(count: number): void;
  /** A replica judged gone: `released` (it deleted its Lease: an orderly stop) or `expired` (it stopped renewing). */
  replicaGone(how: ReplicaGone): void;
}

export const REPLICA_GONE = ['released', 'expired'] as const;
export type ReplicaGone = (typeof REPLICA_GONE)[number];
