import { describe, expect, it } from 'vitest';
import { LABEL_MANAGED_BY, LABEL_SANDBOX } from '../../src/api/v1alpha1/index.js';
import type { V1NetworkPolicy } from '@kubernetes/client-node';
import {
  SANDBOX_NETWORK_POLICY_NAME,
  buildSandboxNetworkPolicy,
  restoredPolicy,
  sandboxPolicyDrift,
  type PolicyDrift,
} from '../../src/sandbox/networkpolicy.js';
import { buildRunPod } from '../../src/sandbox/pod.js';

describe('buildSandboxNetworkPolicy', () => {
  const policy = buildSandboxNetworkPolicy('codemode');

  it('is the one deny-all policy of the namespace', () => {
    expect(policy).toEqual({
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: {
        name: 'codemode-sandbox-deny-all',
        namespace: 'codemode',
        labels: { 'app.kubernetes.io/managed-by': 'codemode-operator' },
      },
      spec: {
        podSelector: { matchLabels: { 'codemode.dev/sandbox': 'true' } },
        policyTypes: ['Ingress', 'Egress'],
      },
    });
    expect(SANDBOX_NETWORK_POLICY_NAME).toBe('codemode-sandbox-deny-all');
  });

  it.each(['ingress', 'egress'] as const)('allows no %s at all', (direction) => {
    expect(policy.spec?.[direction]).toBeUndefined();
  });

  it('selects every sandbox pod the pod builder makes', () => {
    const pod = buildRunPod(
      {
        apiVersion: 'codemode.dev/v1alpha1',
        kind: 'SandboxRun',
        metadata: { name: 'r', namespace: 'codemode', uid: 'u' },
        spec: { language: 'sh', code: 'true', timeoutSeconds: 5 },
      },
      {
        image: 'i',
        imagePullPolicy: 'Never',
        cpuLimit: '1',
        memoryLimit: '1Gi',
        cpuRequest: '1',
        memoryRequest: '1Gi',
        ephemeralStorageLimit: '1Gi',
        workspaceSizeLimit: '1Gi',
        tmpSizeLimit: '1Gi',
        activeDeadlineSeconds: 60,
      },
    );
    for (const [key, value] of Object.entries(policy.spec?.podSelector?.matchLabels ?? {})) {
      expect(pod.metadata?.labels?.[key]).toBe(value);
    }
    expect(policy.metadata?.labels?.[LABEL_MANAGED_BY]).toBe(pod.metadata?.labels?.[LABEL_MANAGED_BY]);
    expect(Object.keys(policy.spec?.podSelector?.matchLabels ?? {})).toEqual([LABEL_SANDBOX]);
  });
});

describe('sandboxPolicyDrift', () => {
  const desired = buildSandboxNetworkPolicy('codemode');
  const spec = desired.spec as NonNullable<V1NetworkPolicy['spec']>;
  const observed = (over: { spec?: Record<string, unknown>; labels?: Record<string, string>; deletionTimestamp?: Date }): V1NetworkPolicy => ({
    metadata: {
      name: SANDBOX_NETWORK_POLICY_NAME,
      namespace: 'codemode',
      resourceVersion: '7',
      labels: over.labels ?? { 'app.kubernetes.io/managed-by': 'codemode-operator' },
      ...(over.deletionTimestamp && { deletionTimestamp: over.deletionTimestamp }),
    },
    spec: { ...spec, ...over.spec } as V1NetworkPolicy['spec'],
  });

  it.each<[string, V1NetworkPolicy | undefined, PolicyDrift]>([
    ['absent', undefined, 'missing'],
    ['being deleted', observed({ deletionTimestamp: new Date() }), 'missing'],
    ['as built', observed({}), 'ok'],
    // What client-node's deserializer produces: every known field present, unset ones undefined.
    [
      'with undefined fields',
      observed({
        spec: { ingress: undefined, egress: undefined, podSelector: { matchLabels: { 'codemode.dev/sandbox': 'true' }, matchExpressions: undefined } },
      }),
      'ok',
    ],
    ['with null and empty lists (same meaning)', observed({ spec: { ingress: [], egress: null } }), 'ok'],
    [
      'with keys in another order',
      observed({ spec: { policyTypes: ['Ingress', 'Egress'], podSelector: { matchLabels: { 'codemode.dev/sandbox': 'true' } } } }),
      'ok',
    ],
    ['with an extra label', observed({ labels: { 'app.kubernetes.io/managed-by': 'codemode-operator', team: 'x' } }), 'ok'],
    ['with an allow-all egress rule', observed({ spec: { egress: [{}] } }), 'modified'],
    ['with an egress rule to one port', observed({ spec: { egress: [{ ports: [{ port: 443, protocol: 'TCP' }] }] } }), 'modified'],
    ['with an allow-all ingress rule', observed({ spec: { ingress: [{ from: [] }] } }), 'modified'],
    ['with Egress dropped from policyTypes', observed({ spec: { policyTypes: ['Ingress'] } }), 'modified'],
    ['with policyTypes in another order', observed({ spec: { policyTypes: ['Egress', 'Ingress'] } }), 'modified'],
    ['selecting other pods', observed({ spec: { podSelector: { matchLabels: { 'codemode.dev/sandbox': 'false' } } } }), 'modified'],
    ['selecting every pod', observed({ spec: { podSelector: {} } }), 'modified'],
    [
      'with an extra selector expression',
      observed({ spec: { podSelector: { matchLabels: { 'codemode.dev/sandbox': 'true' }, matchExpressions: [{ key: 'x', operator: 'Exists' }] } } }),
      'modified',
    ],
    ['without its managed-by label', observed({ labels: {} }), 'modified'],
    ['with another managed-by value', observed({ labels: { 'app.kubernetes.io/managed-by': 'someone' } }), 'modified'],
  ])('%s → %s', (_name, obs, want) => {
    expect(sandboxPolicyDrift(desired, obs)).toBe(want);
  });

  it('finds what restoredPolicy builds correct, keeping the resourceVersion and foreign metadata', () => {
    const edited = observed({ spec: { egress: [{}] }, labels: { team: 'x' } });
    edited.metadata = { ...edited.metadata, annotations: { note: 'n' } };
    const body = restoredPolicy(desired, edited);
    expect(sandboxPolicyDrift(desired, body)).toBe('ok');
    expect(body.spec).toEqual(desired.spec);
    expect(body.metadata).toEqual({
      name: SANDBOX_NETWORK_POLICY_NAME,
      namespace: 'codemode',
      labels: { team: 'x', 'app.kubernetes.io/managed-by': 'codemode-operator' },
      annotations: { note: 'n' },
      resourceVersion: '7',
    });
  });
});
