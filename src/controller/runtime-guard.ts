// Keeps the runtime ConfigMap (session kernels from runtime/) present and current in a namespace
// before any session pod mounts it. Checked once per namespace per process.
import type { Logger } from 'pino';
import { apiErrorMessage, isNotFound, statusOf, type KubeClients } from '../kube/clients.js';
import { buildRuntimeConfigMap } from '../sandbox/runtime-configmap.js';
import { RUNTIME_CONFIGMAP } from '../sandbox/pod.js';

export class RuntimeConfigMapGuard {
  private readonly ensured = new Map<string, Promise<void>>();

  constructor(
    private readonly clients: KubeClients,
    private readonly files: Readonly<Record<string, string>>,
    private readonly log: Logger,
  ) {}

  ensure(namespace: string): Promise<void> {
    // Never write an empty ConfigMap: it would break the kernels of other replicas' pods too.
    if (Object.keys(this.files).length === 0) {
      return Promise.reject(new Error('This operator has no session kernels (runtime/ was not found next to its code), so it cannot start session or pool pods; run it from a checkout or the gateway image, which carry runtime/.'));
    }
    let p = this.ensured.get(namespace);
    if (!p) {
      p = this.ensureOnce(namespace).catch((err: unknown) => {
        this.ensured.delete(namespace);
        throw err;
      });
      this.ensured.set(namespace, p);
    }
    return p;
  }

  private async ensureOnce(namespace: string): Promise<void> {
    const body = buildRuntimeConfigMap(namespace, this.files);
    try {
      const current = await this.clients.core.readNamespacedConfigMap({ namespace, name: RUNTIME_CONFIGMAP });
      if (JSON.stringify(current.data ?? {}) === JSON.stringify(body.data)) return;
      await this.clients.core.replaceNamespacedConfigMap({ namespace, name: RUNTIME_CONFIGMAP, body: { ...body, metadata: { ...body.metadata, resourceVersion: current.metadata?.resourceVersion } } });
      this.log.info({ namespace, configmap: RUNTIME_CONFIGMAP }, 'Updated ConfigMap');
    } catch (err) {
      if (!isNotFound(err)) throw new Error(`Failed to update ConfigMap ${namespace}/${RUNTIME_CONFIGMAP}: ${apiErrorMessage(err)}`, { cause: err });
      try {
        await this.clients.core.createNamespacedConfigMap({ namespace, body });
        this.log.info({ namespace, configmap: RUNTIME_CONFIGMAP }, 'Created ConfigMap');
      } catch (e) {
        if (statusOf(e) !== 409) throw new Error(`Failed to create ConfigMap ${namespace}/${RUNTIME_CONFIGMAP}: ${apiErrorMessage(e)}`, { cause: e });
      }
    }
  }
}
