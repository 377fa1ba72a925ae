// Keeps this version's runtime ConfigMap (session kernels from runtime/) present in a namespace
// before any kernel pod mounts it. The ConfigMap is content-addressed (codemode-runtime-<hash>)
// and immutable: created if missing, never updated, so replicas of two versions never rewrite
// each other's. Old versions are swept by the leader (runtime-sweep.ts): a ConfigMap no pod
// mounts is first marked unused, and deleted only after a grace period in which nobody ensured
// it; ensuring it clears the mark, which also changes its resourceVersion, so a sweep that
// decided on the old one fails its precondition.
import { setHeaderOptions } from '@kubernetes/client-node/dist/middleware.js';
import { PatchStrategy } from '@kubernetes/client-node/dist/patch.js';
import type { Logger } from 'pino';
import { apiErrorMessage, isConflict, isNotFound, statusOf, type KubeClients } from '../kube/clients.js';
import { buildRuntimeConfigMap, runtimeVolume, type RuntimeVolume } from '../sandbox/runtime-configmap.js';

/** Set by the sweep on a runtime ConfigMap that no pod mounts (RFC 3339 time). */
export const ANNOTATION_UNUSED_SINCE = 'codemode.dev/unused-since';
/**
 * How long an ensure is trusted before the next pod creation checks again. Shorter than the
 * sweep's grace period, so a replica that keeps creating pods clears a mark before it expires.
 */
export const ENSURE_CACHE_MS = 60_000;

export class RuntimeConfigMapGuard {
  private readonly ensured = new Map<string, { promise: Promise<void>; atMs: number }>();
  /** The ConfigMap and items this version's kernel pods mount. */
  readonly volume: RuntimeVolume;

  constructor(
    private readonly clients: KubeClients,
    private readonly files: Readonly<Record<string, string>>,
    private readonly log: Logger,
  ) {
    this.volume = runtimeVolume(files);
  }

  get name(): string {
    return this.volume.configMap;
  }

  ensure(namespace: string): Promise<void> {
    // Never create an empty ConfigMap: kernel pods mounting it could not start.
    if (Object.keys(this.files).length === 0) {
      return Promise.reject(
        new Error(
          'This operator has no session kernels (runtime/ was not found next to its code), so it cannot start session or pool pods; run it from a checkout or the gateway image, which carry runtime/.',
        ),
      );
    }
    const cached = this.ensured.get(namespace);
    if (cached && Date.now() - cached.atMs < ENSURE_CACHE_MS) return cached.promise;
    const promise = this.ensureOnce(namespace).catch((err: unknown) => {
      this.ensured.delete(namespace);
      throw err;
    });
    this.ensured.set(namespace, { promise, atMs: Date.now() });
    return promise;
  }

  private async ensureOnce(namespace: string): Promise<void> {
    const name = this.name;
    try {
      const current = await this.clients.core.readNamespacedConfigMap({ namespace, name });
      if (current.metadata?.annotations?.[ANNOTATION_UNUSED_SINCE] === undefined) return;
      await this.clients.core.patchNamespacedConfigMap(
        { namespace, name, body: { metadata: { resourceVersion: current.metadata.resourceVersion, annotations: { [ANNOTATION_UNUSED_SINCE]: null } } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      this.log.info({ namespace, configmap: name }, 'Marked ConfigMap in use');
    } catch (err) {
      // Changed under us (the sweep is deciding on it): check again at the next pod.
      if (isConflict(err)) return void this.ensured.delete(namespace);
      if (!isNotFound(err)) throw new Error(`Failed to read ConfigMap ${namespace}/${name}: ${apiErrorMessage(err)}`, { cause: err });
      try {
        await this.clients.core.createNamespacedConfigMap({ namespace, body: buildRuntimeConfigMap(namespace, this.files) });
        this.log.info({ namespace, configmap: name }, 'Created ConfigMap');
      } catch (e) {
        if (statusOf(e) !== 409) throw new Error(`Failed to create ConfigMap ${namespace}/${name}: ${apiErrorMessage(e)}`, { cause: e });
      }
    }
  }
}
