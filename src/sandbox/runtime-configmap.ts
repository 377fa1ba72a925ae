// The ConfigMap that carries runtime/ (the session kernels) into sandbox pods. ConfigMap keys
// cannot contain '/', so each file gets a flat key and an `items` entry that puts it back at its
// path under the mount.
import type { V1ConfigMap } from '@kubernetes/client-node';
import { LABEL_MANAGED_BY, MANAGED_BY_VALUE } from '../api/v1alpha1/index.js';
import { RUNTIME_CONFIGMAP } from './pod.js';

export function runtimeKey(path: string): string {
  return path.replace(/\//g, '__');
}

/** The volume items for a set of runtime file paths (relative to runtime/), sorted. */
export function runtimeItems(paths: readonly string[]): Array<{ key: string; path: string }> {
  return [...paths].sort().map((path) => ({ key: runtimeKey(path), path }));
}

export function buildRuntimeConfigMap(namespace: string, files: Readonly<Record<string, string>>): V1ConfigMap {
  const data: Record<string, string> = {};
  for (const path of Object.keys(files).sort()) data[runtimeKey(path)] = files[path] as string;
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: RUNTIME_CONFIGMAP, namespace, labels: { [LABEL_MANAGED_BY]: MANAGED_BY_VALUE } },
    data,
  };
}
