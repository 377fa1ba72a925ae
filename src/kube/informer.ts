// client-node's informer keeps a cache and calls back on changes, but on any error other than
// 410 Gone it stops for good. This wrapper restarts it with backoff, so the controller never
// silently goes deaf after an API server hiccup. It also bounds the cache's memory: an optional
// transform strips each object before it is cached (SandboxRuns carry code and output the
// controller does not need), and the initial list is read in pages, each stripped before the
// next is fetched, so a namespace full of large objects is never held whole.
import { ListWatch } from '@kubernetes/client-node/dist/cache.js';
import { Watch } from '@kubernetes/client-node/dist/watch.js';
import type { Informer, KubeConfig, KubernetesListObject, KubernetesObject, ObjectCache } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { GROUP, VERSION } from '../api/v1alpha1/index.js';
import type { KubeClients } from './clients.js';
import { kubeApiMetricsOf, resourceOf, type KubeApiMetrics, type InformerResource } from './api-metrics.js';

export type Listener<T> = (obj: T) => void;

/** One page of a list: `cont` is the continue token of the previous page (undefined first). */
export type ListPageFn<T extends KubernetesObject> = (cont: string | undefined) => Promise<KubernetesListObject<T>>;

export interface InformerOptions<T extends KubernetesObject> {
  labelSelector?: string;
  /** Applied to every object before it is cached or handed to listeners. Must keep metadata. */
  transform?: (obj: T) => T;
}

/**
 * Objects per page of the initial list: bounds the memory a restart needs for large objects (a
 * page of maximum-size SandboxRuns is ~10 MiB of JSON, parsed, then stripped). 2,000 small runs
 * take 200 requests, a few seconds.
 */
export const LIST_PAGE_SIZE = 10;

/**
 * Reads every page (following continue tokens) and transforms each item as it arrives. The
 * result's resourceVersion is the list's snapshot, from which the watch continues.
 */
export async function listAllPages<T extends KubernetesObject>(page: ListPageFn<T>, transform: (obj: T) => T = (o) => o): Promise<KubernetesListObject<T>> {
  const items: T[] = [];
  let cont: string | undefined;
  let last: KubernetesListObject<T>;
  do {
    last = await page(cont);
    for (const item of last.items) items.push(transform(item));
    // Drop the page's objects before fetching the next one.
    last.items = [];
    // Typed lists (pods) are deserialized with `_continue`; custom objects arrive as plain JSON.
    const meta = last.metadata as { _continue?: string; continue?: string } | undefined;
    cont = meta?._continue || meta?.continue || undefined;
  } while (cont !== undefined);
  return { ...last, items };
}

/**
 * The object without metadata.managedFields (pure; the input is not changed): the API server's
 * field-ownership records are often the largest part of a pod and nothing here reads them from a
 * cache. For the informers of pods and SandboxSessions, whose caches hold one of each per live
 * session (SandboxRuns have their own, stricter transform: controller/cached-run.ts).
 */
export function withoutManagedFields<T extends KubernetesObject>(obj: T): T {
  if (!obj.metadata || !('managedFields' in obj.metadata)) return obj;
  const { managedFields: _dropped, ...metadata } = obj.metadata;
  return { ...obj, metadata };
}

/** A Watch whose events carry transformed objects (ERROR events pass unchanged). */
class TransformingWatch<T extends KubernetesObject> extends Watch {
  constructor(
    kc: KubeConfig,
    private readonly transform: (obj: T) => T,
  ) {
    super(kc);
  }

  override watch(
    path: string,
    params: Record<string, string | number | boolean | undefined>,
    cb: (phase: string, apiObj: unknown, watchObj?: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    return super.watch(
      path,
      params,
      (phase, obj, watchObj) => {
        const out = phase === 'ADDED' || phase === 'MODIFIED' || phase === 'DELETED' ? this.transform(obj as T) : obj;
        cb(phase, out, watchObj);
      },
      done,
    );
  }
}

export class ResilientInformer<T extends KubernetesObject> {
  private readonly informer: Informer<T> & ObjectCache<T>;
  private stopped = false;
  private restartDelayMs = 1000;
  private restartTimer: NodeJS.Timeout | undefined;
  /** Where restarts are counted: the metrics of the KubeConfig's requests, if counted. */
  private readonly metrics: KubeApiMetrics | undefined;
  private readonly resource: InformerResource;

  constructor(
    kc: KubeConfig,
    path: string,
    listPage: ListPageFn<T>,
    private readonly log: Logger,
    options: InformerOptions<T> = {},
  ) {
    this.metrics = kubeApiMetricsOf(kc);
    this.resource = resourceOf(path);
    const transform = options.transform ?? ((o: T) => o);
    const watch = options.transform ? new TransformingWatch<T>(kc, transform) : new Watch(kc);
    this.informer = new ListWatch<T>(path, watch, () => listAllPages(listPage, transform), false, options.labelSelector);
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
    try {
      this.metrics?.informerRestarted(this.resource);
    } catch {
      // counting never stops a restart
    }
    this.restartTimer = setTimeout(() => {
      if (this.stopped) return;
      this.informer.start().catch((e: unknown) => this.onError(e));
    }, delay);
    this.restartTimer.unref();
  }
}

/**
 * An informer on one of the operator's own resources (codemode.dev) in `namespace`, its log lines
 * tagged with the plural. Cached without managedFields unless `options` says otherwise.
 */
export function customResourceInformer(
  clients: Pick<KubeClients, 'kc' | 'custom'>,
  namespace: string,
  plural: string,
  log: Logger,
  options: InformerOptions<KubernetesObject> = { transform: withoutManagedFields },
): ResilientInformer<KubernetesObject> {
  return new ResilientInformer<KubernetesObject>(
    clients.kc,
    `/apis/${GROUP}/${VERSION}/namespaces/${namespace}/${plural}`,
    (cont) =>
      clients.custom.listNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace,
        plural,
        limit: LIST_PAGE_SIZE,
        _continue: cont,
      }) as Promise<KubernetesListObject<KubernetesObject>>,
    log.child({ informer: plural }),
    options,
  );
}
