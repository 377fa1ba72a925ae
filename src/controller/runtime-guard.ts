// Keeps this version's runtime ConfigMap (session kernels from runtime/) present in a namespace
// before any kernel pod mounts it. The ConfigMap is content-addressed (codemode-runtime-<hash>)
// and immutable: created if missing, never updated, so replicas of two versions never rewrite
// each other's. Old versions are swept by the leader (runtime-sweep.ts): a ConfigMap no pod
// mounts is first marked unused, and deleted only after a grace period in which nobody ensured
// it; ensuring it clears the mark, which also changes its resourceVersion, so a sweep that
// decided on the old one fails its precondition.
import type { V1ConfigMap } from '@kubernetes/client-node';
import { setHeaderOptions } from '@kubernetes/client-node/dist/middleware.js';
import { PatchStrategy } from '@kubernetes/client-node/dist/patch.js';
import type { Logger } from 'pino';
import { apiErrorMessage, isConflict, isNotFound, statusOf, type KubeClients } from '../kube/clients.js';
import { buildRuntimeConfigMap, isRuntimeConfigMap, runtimeVolume, type RuntimeVolume } from '../sandbox/runtime-configmap.js';

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
    let current: V1ConfigMap | undefined;
    try {
      current = await this.clients.core.readNamespacedConfigMap({ namespace, name });
    } catch (err) {
      if (!isNotFound(err)) throw new Error(`Failed to read ConfigMap ${namespace}/${name}: ${apiErrorMessage(err)}`, { cause: err });
    }
    if (current && !isRuntimeConfigMap(current, this.files)) {
      await this.deleteForeign(namespace, current);
      current = undefined;
    }
    if (!current) return this.create(namespace);
    if (current.metadata?.annotations?.[ANNOTATION_UNUSED_SINCE] === undefined) return;
    try {
      await this.clients.core.patchNamespacedConfigMap(
        { namespace, name, body: { metadata: { resourceVersion: current.metadata.resourceVersion, annotations: { [ANNOTATION_UNUSED_SINCE]: null } } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      this.log.info({ namespace, configmap: name }, 'Marked ConfigMap in use');
    } catch (err) {
      // Changed under us (the sweep is deciding on it): check again at the next pod.
      if (isConflict(err)) return void this.ensured.delete(namespace);
      if (!isNotFound(err)) throw new Error(`Failed to mark ConfigMap ${namespace}/${name} in use: ${apiErrorMessage(err)}`, { cause: err });
      await this.create(namespace);
    }
  }

  /** Creates the ConfigMap; one created meanwhile is used only if it is this version's runtime. */
  private async create(namespace: string): Promise<void> {
    const name = this.name;
    try {
      await this.clients.core.createNamespacedConfigMap({ namespace, body: buildRuntimeConfigMap(namespace, this.files) });
      this.log.info({ namespace, configmap: name }, 'Created ConfigMap');
    } catch (e) {
      if (statusOf(e) !== 409) throw new Error(`Failed to create ConfigMap ${namespace}/${name}: ${apiErrorMessage(e)}`, { cause: e });
      // Another replica of this version, or someone else: only the content tells.
      const found = await this.clients.core.readNamespacedConfigMap({ namespace, name });
      if (!isRuntimeConfigMap(found, this.files))
        throw new Error(
          `ConfigMap ${namespace}/${name} was created by someone else with content that is not this version's runtime, so no kernel pod is started with it. Only the operator may create ConfigMaps in namespace ${namespace}: remove that permission from whoever has it.`,
        );
    }
  }

  /**
   * A ConfigMap under this version's name that is not this version's runtime (isRuntimeConfigMap:
   * someone who may create ConfigMaps here put it there before the operator did). Kernel pods
   * must never mount it: that object (by uid) is deleted, and the caller creates the real one.
   */
  private async deleteForeign(namespace: string, cm: V1ConfigMap): Promise<void> {
    const name = this.name;
    this.log.warn({ namespace, configmap: name }, "Deleting ConfigMap whose content is not this version's runtime");
    try {
      await this.clients.core.deleteNamespacedConfigMap({
        namespace,
        name,
        body: { preconditions: { uid: cm.metadata?.uid, resourceVersion: cm.metadata?.resourceVersion } },
      });
    } catch (err) {
      // Gone or replaced already: the create that follows reads what is there.
      if (!isNotFound(err) && !isConflict(err)) throw new Error(`Failed to delete ConfigMap ${namespace}/${name}: ${apiErrorMessage(err)}`, { cause: err });
    }
  }
}
