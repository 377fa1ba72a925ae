// The ConfigMap that carries runtime/ (the session kernels) into sandbox pods. It is
// content-addressed: its name holds the hash of its files, it is immutable, and a pod mounts the
// one of its own version, so two operator versions side by side (a rolling upgrade) each see
// their own kernels and never rewrite each other's. ConfigMap keys cannot contain '/', so each
// file gets a flat key and an `items` entry that puts it back at its path under the mount.
import type { V1ConfigMap } from '@kubernetes/client-node';
import { LABEL_MANAGED_BY, MANAGED_BY_VALUE } from '../api/v1alpha1/index.js';
import { filesHash, stableStringify } from './template-hash.js';

/** Name prefix of runtime ConfigMaps; the rest is the hash of their files. */
export const RUNTIME_CONFIGMAP_PREFIX = 'codemode-runtime-';
/** On every runtime ConfigMap (value: the files' hash), so old versions can be found and swept. */
export const LABEL_RUNTIME_HASH = 'codemode.dev/runtime-hash';

/** What a pod needs to mount the runtime of its version. */
export interface RuntimeVolume {
  configMap: string;
  items: Array<{ key: string; path: string }>;
}

export function runtimeKey(path: string): string {
  return path.replace(/\//g, '__');
}

/** The volume items for a set of runtime file paths (relative to runtime/), sorted. */
export function runtimeItems(paths: readonly string[]): Array<{ key: string; path: string }> {
  return [...paths].sort().map((path) => ({ key: runtimeKey(path), path }));
}

export function runtimeConfigMapName(files: Readonly<Record<string, string>>): string {
  return `${RUNTIME_CONFIGMAP_PREFIX}${filesHash(files)}`;
}

export function runtimeVolume(files: Readonly<Record<string, string>>): RuntimeVolume {
  return { configMap: runtimeConfigMapName(files), items: runtimeItems(Object.keys(files)) };
}

export function buildRuntimeConfigMap(namespace: string, files: Readonly<Record<string, string>>): V1ConfigMap {
  const data: Record<string, string> = {};
  for (const path of Object.keys(files).sort()) data[runtimeKey(path)] = files[path] as string;
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: runtimeConfigMapName(files),
      namespace,
      labels: { [LABEL_MANAGED_BY]: MANAGED_BY_VALUE, [LABEL_RUNTIME_HASH]: filesHash(files) },
    },
    data,
    // Never updated in place (a new version gets a new name); the kubelet need not watch it.
    immutable: true,
  };
}

/**
 * Whether `cm`, found under this version's runtime ConfigMap name, holds exactly these files and
 * cannot change. The name is the hash of the files, so an operator never writes anything else
 * under it: other content (or a mutable ConfigMap, which the kubelet would refresh in running
 * pods) was put there by someone who may create ConfigMaps in the namespace, and would be the
 * kernel of every sandbox pod, seeing every user's code, output and tool calls.
 */
export function isRuntimeConfigMap(cm: V1ConfigMap, files: Readonly<Record<string, string>>): boolean {
  const want = buildRuntimeConfigMap(cm.metadata?.namespace ?? '', files);
  return cm.immutable === true && Object.keys(cm.binaryData ?? {}).length === 0 && stableStringify(cm.data ?? {}) === stableStringify(want.data ?? {});
}
