// Pool pods are versioned by the hash of their template: the same settings give the same hash in
// every replica, and anything that shapes the pod gives another one (so old pods are replaced).
import type { V1Pod } from '@kubernetes/client-node';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { RuntimeConfigMapGuard } from '../../src/controller/runtime-guard.js';
import { WarmPool, poolPodTemplate } from '../../src/controller/warm-pool.js';
import { controllerOptions } from '../../src/operator.js';
import { LABEL_POOL_HASH } from '../../src/sandbox/pod.js';
import { buildRuntimeConfigMap, runtimeConfigMapName, runtimeVolume } from '../../src/sandbox/runtime-configmap.js';
import { podTemplateHash, stableStringify } from '../../src/sandbox/template-hash.js';

const FILES = { 'python/kernel.py': 'print("k")\n', 'node/kernel.js': 'k()\n' };

function hashOf(env: Record<string, string> = {}, files: Record<string, string> = FILES, identity = 'replica-a'): string {
  const pod = poolPodTemplate(controllerOptions(loadConfig(env), identity), runtimeVolume(files));
  return pod.metadata?.labels?.[LABEL_POOL_HASH] ?? '';
}

describe('pool pod template hash', () => {
  it('is the same for the same inputs, in any replica and any key order', () => {
    expect(hashOf()).toMatch(/^[0-9a-f]{10}$/);
    expect(hashOf({}, FILES, 'replica-b')).toBe(hashOf());
    expect(hashOf({}, { 'node/kernel.js': 'k()\n', 'python/kernel.py': 'print("k")\n' })).toBe(hashOf());
    // Settings that do not shape the pod do not change it.
    expect(hashOf({ CODEMODE_DEFAULT_TIMEOUT_SECONDS: '10', CODEMODE_WARM_POOL_MAX: '20', CODEMODE_OUTPUT_CAP_CHARS: '100' })).toBe(hashOf());
  });

  it.each([
    ['image', { CODEMODE_IMAGE_PYTHON: 'registry.example/sandbox:v2' }],
    ['pull policy', { CODEMODE_IMAGE_PULL_POLICY: 'Always' }],
    ['CPU limit', { CODEMODE_DEFAULT_CPU: '500m' }],
    ['memory limit', { CODEMODE_DEFAULT_MEMORY: '256Mi' }],
    ['CPU request', { CODEMODE_CPU_REQUEST: '50m' }],
    ['memory request', { CODEMODE_MEMORY_REQUEST: '64Mi' }],
    ['ephemeral storage', { CODEMODE_EPHEMERAL_STORAGE_LIMIT: '2Gi' }],
    ['workspace size', { CODEMODE_WORKSPACE_SIZE_LIMIT: '1Gi' }],
    ['tmp size', { CODEMODE_TMP_SIZE_LIMIT: '64Mi' }],
    ['runtime class', { CODEMODE_RUNTIME_CLASS: 'gvisor' }],
    ['deadline (longest claim)', { CODEMODE_SESSION_MAX_LIFETIME_SECONDS: '7200' }],
  ])('changes with the %s', (_n, env) => {
    expect(hashOf(env)).not.toBe(hashOf());
  });

  it.each([
    ['a kernel file changes', { ...FILES, 'python/kernel.py': 'print("k2")\n' }],
    ['a kernel file is added', { ...FILES, 'python/extra.py': '' }],
  ])('changes when %s (the runtime ConfigMap is another)', (_n, files) => {
    expect(hashOf({}, files)).not.toBe(hashOf());
  });

  it('does not hash its own label, and any spec change shows', () => {
    const pod = poolPodTemplate(controllerOptions(loadConfig({}), 'r'), runtimeVolume(FILES));
    const { [LABEL_POOL_HASH]: hash, ...labels } = pod.metadata?.labels ?? {};
    expect(podTemplateHash({ ...pod, metadata: { ...pod.metadata, labels } })).toBe(hash);
    const changed = structuredClone(pod);
    changed.spec!.containers[0]!.command = ['sleep', '1'];
    expect(podTemplateHash({ ...changed, metadata: { ...changed.metadata, labels } })).not.toBe(hash);
  });

  it('sorts keys at every level', () => {
    expect(stableStringify({ b: [{ y: 1, x: undefined, a: 2 }], a: null })).toBe('{"a":null,"b":[{"a":2,"y":1}]}');
  });
});

describe('content-addressed runtime ConfigMap', () => {
  it('is named by the hash of its files, immutable, labelled for the sweep, and mounted by name', () => {
    const cm = buildRuntimeConfigMap('ns', FILES);
    expect(cm.metadata?.name).toBe(runtimeConfigMapName(FILES));
    expect(cm.metadata?.name).toMatch(/^codemode-runtime-[0-9a-f]{10}$/);
    expect(cm.metadata?.labels?.['codemode.dev/runtime-hash']).toBe(cm.metadata?.name?.slice('codemode-runtime-'.length));
    expect(cm.immutable).toBe(true);
    expect(runtimeConfigMapName({ ...FILES, 'python/kernel.py': 'other' })).not.toBe(cm.metadata?.name);
    const pod = poolPodTemplate(controllerOptions(loadConfig({}), 'r'), runtimeVolume(FILES));
    expect(pod.spec?.volumes?.find((v) => v.name === 'runtime')?.configMap?.name).toBe(cm.metadata?.name);
    expect(pod.spec?.activeDeadlineSeconds).toBeGreaterThan(3600);
  });
});

describe('WarmPool.couldServe (cold pods that count as demand)', () => {
  // Only the pure parts of WarmPool are used: no API request is made.
  const unused = {} as never;
  const opts = controllerOptions(loadConfig({}), 'r');
  const pool = new WarmPool({
    clients: unused,
    opts,
    max: 8,
    pods: unused,
    policies: unused,
    runtime: new RuntimeConfigMapGuard(unused, FILES, pino({ level: 'silent' })),
    log: pino({ level: 'silent' }),
  });
  const template = poolPodTemplate(opts, runtimeVolume(FILES));
  const container = template.spec?.containers[0];
  const pod = (labels: Record<string, string>, limits = container?.resources?.limits, image = container?.image): V1Pod => ({
    metadata: { labels },
    spec: { containers: [{ name: 'sandbox', image, resources: { limits } }] },
  });
  it.each([
    ['a cold run pod with the pool image and limits', pod({ 'codemode.dev/run': 'r' }), true],
    ['the same limits written canonically by the API server', pod({ 'codemode.dev/run': 'r' }, { ...container?.resources?.limits, cpu: '1000m' }), true],
    ['a python session pod', pod({ 'codemode.dev/session': 's', 'codemode.dev/runtime': 'python' }), true],
    ['a bash session pod (the pool has python kernels)', pod({ 'codemode.dev/session': 's', 'codemode.dev/runtime': 'bash' }), false],
    ['a run with its own limits', pod({ 'codemode.dev/run': 'r' }, { ...container?.resources?.limits, memory: '1Gi' }), false],
    ['a run with another image', pod({ 'codemode.dev/run': 'r' }, container?.resources?.limits, 'other:v1'), false],
    ['a pool pod', pod({ 'codemode.dev/pool': 'claimed', 'codemode.dev/run': 'r' }), false],
  ])('%s: %s', (_n, p, expected) => {
    expect(pool.couldServe(p)).toBe(expected);
  });
});
