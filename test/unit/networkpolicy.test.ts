import { describe, expect, it } from 'vitest';
import { LABEL_MANAGED_BY, LABEL_SANDBOX } from '../../src/api/v1alpha1/index.js';
import { SANDBOX_NETWORK_POLICY_NAME, buildSandboxNetworkPolicy } from '../../src/sandbox/networkpolicy.js';
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
