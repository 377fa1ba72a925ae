// Installs this checkout's CRDs (crds/, generated from src/api) with server-side apply and waits
// until the API server serves every kind they define. Used by `npm start` and `npm run bench`;
// `npm test` does the same with kubectl (test/run-all.sh). In real clusters `helm install` of
// charts/codemode-operator installs them.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import {
  KubernetesObjectApi,
  PatchStrategy,
  loadAllYaml,
  type KubeConfig,
  type KubernetesObject,
  type V1CustomResourceDefinition,
} from '@kubernetes/client-node';

const SERVED_WAIT_MS = 60_000;

/**
 * The CRD documents in `dir` (the checkout's crds/), as client-node's models: KubernetesObjectApi
 * serializes a CRD through V1CustomResourceDefinition, which reads `_enum`, `_default` and
 * `xKubernetes...`, so plain parsed YAML lost every enum, default and x-kubernetes field on apply.
 */
export function crdDocuments(dir: string): V1CustomResourceDefinition[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .flatMap((f) => loadAllYaml(readFileSync(join(dir, f), 'utf8')) as V1CustomResourceDefinition[]);
}

/**
 * Applies the CRDs in `dir` (and `extra` objects, e.g. a namespace) as field manager `manager`, then waits
 * until a list of every served kind succeeds: Established is not yet served (the API server
 * answers 429 "storage is (re)initializing" until the kind's watch cache is ready).
 */
export async function installCrds(kc: KubeConfig, dir: string, manager: string, extra: KubernetesObject[] = []): Promise<void> {
  const api = KubernetesObjectApi.makeApiClient(kc);
  const crds = crdDocuments(dir);
  for (const obj of [...crds, ...extra]) {
    await api.patch(obj, undefined, undefined, manager, true, PatchStrategy.ServerSideApply);
  }
  const kinds = crds.flatMap((c) => c.spec.versions.filter((v) => v.served).map((v) => ({ apiVersion: `${c.spec.group}/${v.name}`, kind: c.spec.names.kind })));
  const deadline = Date.now() + SERVED_WAIT_MS;
  for (const { apiVersion, kind } of kinds) {
    for (;;) {
      try {
        await api.list(apiVersion, kind, undefined, undefined, undefined, undefined, undefined, undefined, 1);
        break;
      } catch (err) {
        if (Date.now() > deadline) {
          throw new Error(
            `The API server does not serve ${kind} (${apiVersion}) ${SERVED_WAIT_MS / 1000} s after its CRD was applied: ${(err as Error).message}`,
            {
              cause: err,
            },
          );
        }
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  }
}
