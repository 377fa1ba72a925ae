// The NetworkPolicy that cuts every sandbox pod off the network.
import type { V1NetworkPolicy } from '@kubernetes/client-node';
import { LABEL_MANAGED_BY, LABEL_SANDBOX, MANAGED_BY_VALUE, SANDBOX_LABEL_VALUE } from '../api/v1alpha1/index.js';

export const SANDBOX_NETWORK_POLICY_NAME = 'codemode-sandbox-deny-all';

/**
 * One policy per namespace selecting every sandbox pod by label, rather than one per run:
 * - it exists before any pod is created, so there is no window in which a pod runs unprotected;
 * - it costs no API write per run;
 * - it relies on a label the pod builder always sets, so it cannot be forgotten for one run.
 * Both policy types with no rules means: no ingress and no egress at all (DNS included).
 */
export function buildSandboxNetworkPolicy(namespace: string): V1NetworkPolicy {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: {
      name: SANDBOX_NETWORK_POLICY_NAME,
      namespace,
      labels: { [LABEL_MANAGED_BY]: MANAGED_BY_VALUE },
    },
    spec: {
      podSelector: { matchLabels: { [LABEL_SANDBOX]: SANDBOX_LABEL_VALUE } },
      // No `ingress`/`egress` keys at all: the API server omits empty lists when it returns the
      // object, so leaving them out keeps desired and observed objects equal.
      policyTypes: ['Ingress', 'Egress'],
    },
  };
}

/** How an observed policy differs from the desired one; anything but 'ok' must be restored. */
export type PolicyDrift = 'ok' | 'missing' | 'modified';

/**
 * Pure: compares the observed object with the desired one. The spec must be equal in meaning
 * (undefined fields and empty lists ignored: the API server omits both, and an empty `egress`
 * list under policyType Egress denies exactly what an absent one does); the desired labels must
 * be present (the informer selects on them), extra labels and annotations are tolerated. A policy
 * being deleted counts as missing: it cannot be kept.
 */
export function sandboxPolicyDrift(desired: V1NetworkPolicy, observed: V1NetworkPolicy | undefined): PolicyDrift {
  if (!observed || observed.metadata?.deletionTimestamp) return 'missing';
  for (const [key, value] of Object.entries(desired.metadata?.labels ?? {})) {
    if (observed.metadata?.labels?.[key] !== value) return 'modified';
  }
  return canonicalJson(observed.spec) === canonicalJson(desired.spec) ? 'ok' : 'modified';
}

/**
 * Pure: the body that puts the desired spec and labels back over `observed` (a PUT with its
 * resourceVersion, so a concurrent edit conflicts instead of being silently overwritten).
 * Server-side apply would not do: it never removes fields another manager added (an extra egress
 * rule added with `kubectl edit` would survive it).
 */
export function restoredPolicy(desired: V1NetworkPolicy, observed: V1NetworkPolicy): V1NetworkPolicy {
  return {
    ...desired,
    metadata: {
      ...desired.metadata,
      labels: { ...observed.metadata?.labels, ...desired.metadata?.labels },
      ...(observed.metadata?.annotations && { annotations: observed.metadata.annotations }),
      resourceVersion: observed.metadata?.resourceVersion,
    },
  };
}

/**
 * JSON with sorted keys, without undefined or null values and empty lists. Empty objects stay:
 * they mean something (`egress: [{}]` allows all egress, `podSelector: {}` selects every pod).
 */
function canonicalJson(value: unknown): string {
  return JSON.stringify(prune(value) ?? null);
}

function prune(value: unknown): unknown {
  if (value === null || value === undefined) return undefined;
  if (Array.isArray(value)) {
    const items = value.map(prune).filter((v) => v !== undefined);
    return items.length ? items : undefined;
  }
  if (typeof value === 'object') {
    const entries = Object.keys(value)
      .sort()
      .map((k) => [k, prune((value as Record<string, unknown>)[k])] as const)
      .filter(([, v]) => v !== undefined);
    return Object.fromEntries(entries);
  }
  return value;
}
