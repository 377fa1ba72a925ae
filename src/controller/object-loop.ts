// What the SandboxRun and SandboxSession controllers share (controller-runtime's Controller): a
// work queue whose handler is timed into the reconcile metrics; an object queued when its informer
// sees it change and again every resync period (the level-based safety net); a pod's change queued
// as the key of the object that controls it. Each controller keeps only its reconcile.
import type { KubernetesObject, V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { apiErrorMessage } from '../kube/clients.js';
import type { ControllerMetrics } from './metrics.js';
import { WorkQueue, type Handler } from './workqueue.js';

/** The work queue's key of an object: `namespace/name`. */
export function objectKey(obj: Pick<KubernetesObject, 'metadata'>): string {
  return `${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`;
}

export interface ObjectLoopOptions {
  /** The controller's name: the metrics' `controller` label. */
  controller: string;
  /** The kind of the objects: a pod whose controlling owner is of this kind queues its owner. */
  kind: string;
  workers: number;
  objects: { list(): readonly KubernetesObject[]; onChange(listener: (obj: KubernetesObject) => void): void };
  pods: { onChange(listener: (pod: V1Pod) => void): void };
  resyncSeconds: number;
  log: Logger;
  metrics?: ControllerMetrics;
}

export class ObjectLoop {
  /** Keys are held until start(): no reconcile before every informer the controller reads has listed. */
  readonly queue: WorkQueue;
  private resync: NodeJS.Timeout | undefined;

  constructor(
    private readonly o: ObjectLoopOptions,
    reconcile: Handler,
  ) {
    this.queue = new WorkQueue(timed(o.controller, reconcile, o.metrics), {
      workers: o.workers,
      startPaused: true,
      metrics: o.metrics?.queue(o.controller),
      onError: (key, err) => o.log.warn({ key, err: apiErrorMessage(err) }, 'Reconcile failed; retrying'),
    });
    o.objects.onChange((obj) => this.queue.add(objectKey(obj)));
    o.pods.onChange((pod) => {
      // The owner reference has the object's full name (a label may be shortened to 63 chars).
      const owner = pod.metadata?.ownerReferences?.find((r) => r.controller && r.kind === o.kind);
      if (owner && pod.metadata?.namespace) this.queue.add(`${pod.metadata.namespace}/${owner.name}`);
    });
  }

  /** Queues every object now and every resync period, and starts reconciling. */
  start(): void {
    this.addAll();
    this.queue.start();
    this.resync = setInterval(() => this.addAll(), this.o.resyncSeconds * 1000);
    this.resync.unref();
  }

  stop(): void {
    clearInterval(this.resync);
    this.queue.stop();
  }

  /** Queues the objects `which` picks (all by default), e.g. to look at them before their requeue time. */
  addAll(which: (obj: KubernetesObject) => boolean = () => true): void {
    for (const obj of this.o.objects.list()) if (which(obj)) this.queue.add(objectKey(obj));
  }
}

/** `reconcile` with its outcome and duration reported to the metrics (a throw is reported, then rethrown). */
function timed(controller: string, reconcile: Handler, metrics: ControllerMetrics | undefined): Handler {
  return async (key) => {
    const start = performance.now();
    try {
      const r = await reconcile(key);
      metrics?.reconcile(controller, r?.requeueAfterMs !== undefined ? 'requeue_after' : 'success', (performance.now() - start) / 1000);
      return r;
    } catch (err) {
      metrics?.reconcile(controller, 'error', (performance.now() - start) / 1000);
      throw err;
    }
  };
}
