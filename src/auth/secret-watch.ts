// Follows one Secret: read it, then watch it by name (fieldSelector), and on any end of the watch
// read and watch again after a backoff. The informer wrapper in src/controller watches whole
// collections; RBAC here grants get/list/watch on this one Secret only (resourceNames).
import type { CoreV1Api, KubeConfig, V1Secret } from '@kubernetes/client-node';
import { Watch } from '@kubernetes/client-node/dist/watch.js';
import type { Logger } from 'pino';
import { isNotFound } from '../kube/clients.js';

export class SecretWatch {
  private stopped = false;
  private request: { abort(): void } | undefined;
  private timer: NodeJS.Timeout | undefined;
  private delayMs = 1000;

  constructor(
    private readonly kc: KubeConfig,
    private readonly core: CoreV1Api,
    private readonly namespace: string,
    private readonly name: string,
    private readonly onSecret: (s: V1Secret | undefined) => void,
    private readonly log: Logger,
    /** What the Secret is for, in log messages; told of every failed read (e.g. forbidden). */
    private readonly options: { what?: string; onError?: (err: unknown) => void } = {},
  ) {}

  /** Resolves after the first read (the Secret's content, or its absence, is known). */
  async start(): Promise<void> {
    this.stopped = false;
    await this.cycle();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.request?.abort();
  }

  private async cycle(): Promise<void> {
    let rv: string | undefined;
    try {
      const s = await this.core.readNamespacedSecret({ namespace: this.namespace, name: this.name });
      rv = s.metadata?.resourceVersion;
      this.onSecret(s);
    } catch (err) {
      if (!isNotFound(err)) {
        this.options.onError?.(err);
        return this.retry(err);
      }
      this.onSecret(undefined);
    }
    try {
      this.request = await new Watch(this.kc).watch(
        `/api/v1/namespaces/${this.namespace}/secrets`,
        { fieldSelector: `metadata.name=${this.name}`, ...(rv && { resourceVersion: rv }), allowWatchBookmarks: false },
        (type: string, obj: V1Secret) => {
          this.delayMs = 1000;
          if (type === 'DELETED') this.onSecret(undefined);
          else if (type === 'ADDED' || type === 'MODIFIED') this.onSecret(obj);
        },
        (err: unknown) => this.retry(err),
      );
    } catch (err) {
      this.retry(err);
    }
  }

  private retry(err: unknown): void {
    if (this.stopped) return;
    if (err)
      this.log.warn(
        { err: String((err as Error)?.message ?? err), secret: this.name },
        `Watch of ${this.options.what ?? 'the tokens Secret'} ended; watching again`,
      );
    const delay = this.delayMs;
    this.delayMs = Math.min(this.delayMs * 2, 30_000);
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.cycle(), err ? delay : 0);
    this.timer.unref();
  }
}
