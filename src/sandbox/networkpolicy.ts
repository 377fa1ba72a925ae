// The NetworkPolicy that cuts every sandbox pod off the network.
import type { V1NetworkPolicy } from '@kubernetes/client-node';
import {
  LABEL_MANAGED_BY,
  LABEL_SANDBOX,
  MANAGED_BY_VALUE,
  SANDBOX_LABEL_VALUE,
} from '../api/v1alpha1/index.js';

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
