// Content hashes that version what the operator creates: a pool pod carries the hash of the
// template it was built from, a runtime ConfigMap is named after the hash of its files. Pure and
// deterministic (keys sorted), so every replica of one version computes the same value and any
// change that shapes a pod gives a different one.
import { createHash } from 'node:crypto';
import type { V1Pod, V1PodSpec } from '@kubernetes/client-node';

/** Length of the hex hashes put in labels and names: 40 bits, enough to tell versions apart. */
export const HASH_LENGTH = 10;

/** JSON with object keys sorted at every level; undefined members are left out, as JSON does. */
export function stableStringify(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? 'null' : stableStringify(v))).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.keys(value)
      .sort()
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${stableStringify((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

function shortHash(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, HASH_LENGTH);
}

/**
 * Hash of everything that shapes a pod built from this template: its labels and its whole spec
 * (image, pull policy, resources, volumes and their limits, runtime class, command, deadline, and
 * the runtime ConfigMap's content-addressed name). Name, namespace, owner and user are not shape.
 */
export function podTemplateHash(pod: V1Pod): string {
  return shortHash(stableStringify({ labels: pod.metadata?.labels ?? {}, spec: withoutUser(pod.spec) ?? {} }));
}

/** `spec` without its user: each sandbox pod has one of its own (sandboxUid), which shapes nothing. */
export function withoutUser(spec: V1PodSpec | undefined): V1PodSpec | undefined {
  if (!spec) return spec;
  return {
    ...spec,
    ...(spec.securityContext && { securityContext: { ...spec.securityContext, runAsUser: undefined } }),
    containers: spec.containers.map((c) => (c.securityContext ? { ...c, securityContext: { ...c.securityContext, runAsUser: undefined } } : c)),
  };
}

/** Hash of a set of files (path → content), independent of the order they were read in. */
export function filesHash(files: Readonly<Record<string, string>>): string {
  return shortHash(stableStringify(files));
}
