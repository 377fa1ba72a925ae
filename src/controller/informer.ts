// client-node's informer keeps a cache and calls back on changes, but on any error other than
// 410 Gone it stops for good. This wrapper restarts it with backoff, so the controller never
// silently goes deaf after an API server hiccup.
import { makeInformer } from '@kubernetes/client-node';
import type { Informer, KubeConfig, KubernetesListObject, KubernetesObject, ObjectCache } from '@kubernetes/client-node';
import type { Logger } from 'pino';

export type Listener<T> = (obj: T) => void;

export class ResilientInformer<T extends KubernetesObject> {
  private readonly informer: Informer<T> & ObjectCache<T>;
  private stopped = false;
  private restartDelayMs = 1000;
  private restartTimer: NodeJS.Timeout | undefined;

  constructor(
    kc: KubeConfig,
    path: string,
    listFn: () => Promise<KubernetesListObject<T>>,
    private readonly log: Logger,
    labelSelector?: string,
  ) {
    this.informer = makeInformer<T>(kc, path, listFn, labelSelector);
    this.informer.on('error', (err: unknown) => this.onError(err));
    this.informer.on('connect', () => {
      this.restartDelayMs = 1000;
    });
  }

  onChange(cb: Listener<T>): void {
    this.informer.on('add', cb);
    this.informer.on('update', cb);
    this.informer.on('delete', cb);
  }

  onDelete(cb: Listener<T>): void {
    this.informer.on('delete', cb);
  }

  /** Lists, fills the cache, starts watching; resolves once the cache is filled. */
  async start(): Promise<void> {
    this.stopped = false;
    await this.informer.start();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.restartTimer);
    await this.informer.stop();
  }

  get(name: string, namespace: string): T | undefined {
    return this.informer.get(name, namespace);
  }

  list(namespace?: string): readonly T[] {
    return this.informer.list(namespace);
  }

  private onError(err: unknown): void {
    if (this.stopped) return;
    const delay = this.restartDelayMs;
    this.restartDelayMs = Math.min(this.restartDelayMs * 2, 30_000);
    this.log.warn({ err: String((err as Error)?.message ?? err), retryInMs: delay }, 'Informer stopped; restarting');
    this.restartTimer = setTimeout(() => {
      if (this.stopped) return;
      this.informer.start().catch((e: unknown) => this.onError(e));
    }, delay);
    this.restartTimer.unref();
  }
}
