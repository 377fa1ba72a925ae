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
    /**
     * What the Secret is for, in log messages; told of every failed read (e.g. forbidden). The
     * watch's inactivity timeout is client-node's (30 s) unless given (tests shorten it).
     */
    private readonly options: { what?: string; onError?: (err: unknown) => void; inactivityTimeoutMs?: number } = {},
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
      const watch = new Watch(this.kc);
      // client-node declares the field private but sets it per instance (its own tests change it).
      if (this.options.inactivityTimeoutMs !== undefined)
        (watch as unknown as { requestTimeoutMs: number }).requestTimeoutMs = this.options.inactivityTimeoutMs;
      this.request = await watch.watch(
        `/api/v1/namespaces/${this.namespace}/secrets`,
        { fieldSelector: `metadata.name=${this.name}`, ...(rv && { resourceVersion: rv }), allowWatchBookmarks: false },
        (type: string, obj: V1Secret) => {
          this.delayMs = 1000;
          if (type === 'DELETED') this.onSecret(undefined);
          else if (type === 'ADDED' || type === 'MODIFIED') this.onSecret(obj);
        },
        (err: unknown) => this.ended(err),
      );
    } catch (err) {
      this.retry(err);
    }
  }

  /**
   * The watch ended. Nothing for the inactivity timeout (a Secret that does not change, as most
   * don't) or the server closing it are its ordinary ends: read and watch again at once, quietly.
   * The timeout already spaced the cycles, as client-node's ListWatch reasons for its informers.
   */
  private ended(err: unknown): void {
    if (this.stopped) return;
    if (err && (err as Error).name !== 'TimeoutError') return this.retry(err);
    this.log.debug({ secret: this.name, timedOut: Boolean(err) }, `Watch of ${this.options.what ?? 'the tokens Secret'} ended; watching again`);
    this.delayMs = 1000;
    this.schedule(0);
  }

  private retry(err: unknown): void {
    if (this.stopped) return;
    this.log.warn(
      { err: String((err as Error)?.message ?? err), secret: this.name, retryInMs: this.delayMs },
      `Reading or watching ${this.options.what ?? 'the tokens Secret'} failed; trying again`,
    );
    const delay = this.delayMs;
    this.delayMs = Math.min(this.delayMs * 2, 30_000);
    this.schedule(delay);
  }

  private schedule(delayMs: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.cycle(), delayMs);
    this.timer.unref();
  }
}
