import { describe, expect, it } from 'vitest';
import type { SandboxRun } from '../../../src/api/v1alpha1/index.js';
import { SANDBOX_UID_BASE, buildCanaryPod, buildRunPod, type PodBuildOptions } from '../../../src/sandbox/pod.js';
import { withoutUser } from '../../../src/sandbox/template-hash.js';
import { buildSandboxNetworkPolicy } from '../../../src/sandbox/networkpolicy.js';
import type { V1Pod } from '@kubernetes/client-node';
import type { SandboxShape } from '../../../src/profiles/profile.js';
import { checkPods, stalePods, type CanaryConfig } from '../../../src/selfcheck/canary-run.js';
import { ECHO_PROGRAM, buildEchoPod } from '../../../src/selfcheck/echo-pod.js';

const opts: PodBuildOptions = {
  image: 'codemode.local/sandbox:v1',
  imagePullPolicy: 'IfNotPresent',
  cpuLimit: '1',
  memoryLimit: '512Mi',
  cpuRequest: '100m',
  memoryRequest: '128Mi',
  ephemeralStorageLimit: '1Gi',
  workspaceSizeLimit: '512Mi',
  tmpSizeLimit: '128Mi',
  activeDeadlineSeconds: 300,
};
const run: SandboxRun = {
  apiVersion: 'codemode.dev/v1alpha1',
  kind: 'SandboxRun',
  metadata: { name: 'r', namespace: 'ns', uid: 'u' },
  spec: { language: 'python', code: 'print(1)', timeoutSeconds: 30 },
};

const canary = buildCanaryPod('ns', opts);
const runPod = buildRunPod(run, opts);
const policySelector = buildSandboxNetworkPolicy('ns').spec?.podSelector?.matchLabels ?? {};
const selectedByPolicy = (labels: Record<string, string> | undefined): boolean => Object.entries(policySelector).every(([k, v]) => labels?.[k] === v);

describe('buildCanaryPod', () => {
  it('is a run pod in everything that isolates it: same spec, only identity differs', () => {
    // The canary proves what run pods get only if it IS one: compare the whole spec, but for the
    // user, which is each sandbox pod's own (sandboxUid).
    expect(withoutUser(canary.spec)).toEqual(withoutUser(runPod.spec));
    expect(canary.spec?.securityContext?.runAsUser).toBeGreaterThanOrEqual(SANDBOX_UID_BASE);
    expect(canary.spec?.securityContext?.runAsUser).not.toBe(runPod.spec?.securityContext?.runAsUser);
  });

  it.each<[string, unknown]>([
    ['generateName', 'codemode-canary-'],
    ['namespace', 'ns'],
    ['ownerReferences', undefined],
  ])('metadata.%s', (key, value) => {
    expect((canary.metadata as Record<string, unknown>)[key]).toEqual(value);
  });

  it('carries the label the deny-all NetworkPolicy selects', () => {
    expect(selectedByPolicy(canary.metadata?.labels)).toBe(true);
    expect(canary.metadata?.labels).toMatchObject({ 'codemode.dev/selfcheck': 'canary', 'app.kubernetes.io/managed-by': 'codemode-operator' });
  });
});

describe('buildEchoPod', () => {
  const echo = buildEchoPod('ns', { image: 'img', imagePullPolicy: 'Never', activeDeadlineSeconds: 300 });
  const c = echo.spec?.containers[0];

  it('is NOT selected by the deny-all NetworkPolicy (it must be reachable by non-sandbox clients)', () => {
    expect(selectedByPolicy(echo.metadata?.labels)).toBe(false);
    expect(echo.metadata?.labels).toEqual({ 'app.kubernetes.io/managed-by': 'codemode-operator', 'codemode.dev/selfcheck': 'echo' });
  });

  it.each<[string, unknown]>([
    ['automountServiceAccountToken', false],
    ['activeDeadlineSeconds', 300],
    ['restartPolicy', 'Never'],
  ])('spec.%s', (key, value) => {
    expect((echo.spec as unknown as Record<string, unknown>)[key]).toEqual(value);
  });

  it('runs a fixed program with the restricted hardening of sandboxes', () => {
    expect(c?.command).toEqual(['python3', '-c', ECHO_PROGRAM]);
    // (as nobody: it runs no one's code)
    expect(c?.securityContext).toEqual({ ...runPod.spec?.containers[0]?.securityContext, runAsUser: 65534 });
    expect(c?.resources?.limits).toEqual({ cpu: '200m', memory: '64Mi' });
  });
});

describe('stalePods', () => {
  const pod = (name: string, created?: string): V1Pod => ({ metadata: { name, ...(created !== undefined && { creationTimestamp: new Date(created) }) } });
  const now = new Date('2026-11-23T12:00:00Z');
  it.each<[string, V1Pod[], string[]]>([
    ['an old leftover', [pod('a', '2026-11-23T11:00:00Z')], ['a']],
    ['a check running now (maybe another replica)', [pod('b', '2026-11-23T11:59:50Z')], []],
    ['just past the limit', [pod('c', '2026-11-23T11:49:59Z')], ['c']],
    ['no creation time yet', [pod('d')], []],
  ])('%s', (_name, pods, stale) => {
    expect(stalePods(pods, now)).toEqual(stale);
  });
});

describe('checkPods: the canary is a sandbox of the default profile', () => {
  const config: CanaryConfig = {
    namespace: 'ns',
    imagePullPolicy: 'IfNotPresent',
    cpuRequest: '100m',
    memoryRequest: '128Mi',
    ephemeralStorageLimit: '1Gi',
    tmpSizeLimit: '128Mi',
    podStartupTimeoutSeconds: 60,
    maxProcesses: 128,
    bindAddress: '0.0.0.0',
    port: 8080,
  };
  const img = (python: string): SandboxShape['images'] => ({ python, bash: 'b', sh: 's', node: 'n' });
  const base: SandboxShape = {
    images: img('py:1'),
    defaultCpu: '1',
    defaultMemory: '512Mi',
    maxCpu: '2',
    maxMemory: '1Gi',
    workspaceMedium: 'Disk',
    workspaceSizeLimit: '512Mi',
  };
  const onSandboxNodes: SandboxShape = {
    ...base,
    images: img('py:2'),
    defaultMemory: '256Mi',
    runtimeClassName: 'gvisor',
    nodeSelector: { 'codemode.dev/sandbox': 'true' },
    tolerations: [{ key: 'codemode.dev/sandbox', operator: 'Exists', effect: 'NoSchedule' }],
  };
  it.each<[string, SandboxShape, { image: string; memory: string; runtimeClassName?: string; nodeSelector?: unknown; tolerations?: unknown }]>([
    ['the gateway’s settings: placed by the scheduler', base, { image: 'py:1', memory: '512Mi' }],
    [
      'a default profile on dedicated nodes: its image, limits, runtime class, selector and tolerations',
      onSandboxNodes,
      {
        image: 'py:2',
        memory: '256Mi',
        runtimeClassName: 'gvisor',
        nodeSelector: onSandboxNodes.nodeSelector,
        tolerations: onSandboxNodes.tolerations,
      },
    ],
  ])('%s', (_name, shape, want) => {
    const { canary: c, echo: e } = checkPods(config, shape);
    expect(c.spec?.containers[0]?.image).toBe(want.image);
    expect(c.spec?.containers[0]?.resources?.limits?.memory).toBe(want.memory);
    expect(c.spec?.runtimeClassName).toBe(want.runtimeClassName);
    expect(e.spec?.containers[0]?.image).toBe(want.image);
    // The echo listener stands on the same nodes (dedicated ones may be the only ones it may use).
    for (const p of [c, e]) {
      expect(p.spec?.nodeSelector).toEqual(want.nodeSelector);
      expect(p.spec?.tolerations).toEqual(want.tolerations);
    }
  });
});
