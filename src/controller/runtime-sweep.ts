// Leader only: deletes the runtime ConfigMaps of other versions once no pod mounts them. A
// ConfigMap is marked unused first and deleted after a grace period with its resourceVersion as
// precondition; a replica still on that version clears the mark when it next creates a pod (see
// runtime-guard.ts), so a version still running never loses its kernels.
import type { V1ConfigMap, V1Pod } from '@kubernetes/client-node';
import { setHeaderOptions } from '@kubernetes/client-node/dist/middleware.js';
import { PatchStrategy } from '@kubernetes/client-node/dist/patch.js';
import type { Logger } from 'pino';
import { apiErrorMessage, isConflict, isNotFound, type KubeClients } from '../kube/clients.js';
import { LABEL_RUNTIME_HASH } from '../sandbox/runtime-configmap.js';
import { ANNOTATION_UNUSED_SINCE } from './runtime-guard.js';

/** Unused runtime ConfigMaps are deleted this long after they were marked. */
export const SWEEP_GRACE_MS = 10 * 60_000;

export type SweepAction = 'keep' | 'mark' | 'delete';

/** Names of the ConfigMaps mounted by these pods (pods being deleted still mount theirs). */
export function mountedConfigMaps(pods: readonly V1Pod[]): Set<string> {
  const names = new Set<string>();
  for (const p of pods) for (const v of p.spec?.volumes ?? []) if (v.configMap?.name) names.add(v.configMap.name);
  return names;
}

/** Pure: what to do with one runtime ConfigMap. */
export function sweepAction(cm: V1ConfigMap, p: { current: string; mounted: ReadonlySet<string>; nowMs: number; graceMs?: number }): SweepAction {
  const name = cm.metadata?.name ?? '';
  if (name === p.current || p.mounted.has(name) || cm.metadata?.deletionTimestamp) return 'keep';
  const since = cm.metadata?.annotations?.[ANNOTATION_UNUSED_SINCE];
  if (since === undefined) return 'mark';
  const sinceMs = new Date(since).getTime();
  // An unreadable mark is rewritten rather than trusted.
  if (!Number.isFinite(sinceMs)) return 'mark';
  return p.nowMs - sinceMs >= (p.graceMs ?? SWEEP_GRACE_MS) ? 'delete' : 'keep';
}

export async function sweepRuntimeConfigMaps(
  clients: KubeClients,
  namespace: string,
  current: string,
  pods: readonly V1Pod[],
  log: Logger,
  nowMs = Date.now(),
): Promise<void> {
  const list = await clients.core.listNamespacedConfigMap({ namespace, labelSelector: LABEL_RUNTIME_HASH });
  const mounted = mountedConfigMaps(pods);
  for (const cm of list.items) {
    const name = cm.metadata?.name ?? '';
    const action = sweepAction(cm, { current, mounted, nowMs });
    try {
      if (action === 'mark') {
        await clients.core.patchNamespacedConfigMap(
          {
            namespace,
            name,
            body: { metadata: { resourceVersion: cm.metadata?.resourceVersion, annotations: { [ANNOTATION_UNUSED_SINCE]: new Date(nowMs).toISOString() } } },
          },
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        );
        log.info({ configmap: name }, 'Marked ConfigMap unused');
      } else if (action === 'delete') {
        await clients.core.deleteNamespacedConfigMap({
          namespace,
          name,
          body: { preconditions: { uid: cm.metadata?.uid, resourceVersion: cm.metadata?.resourceVersion } },
        });
        log.info({ configmap: name }, 'Deleted ConfigMap of an older runtime');
      }
    } catch (err) {
      if (!isConflict(err) && !isNotFound(err)) log.warn({ configmap: name, err: apiErrorMessage(err) }, 'Failed to sweep runtime ConfigMap');
    }
  }
}
