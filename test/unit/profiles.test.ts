import { describe, expect, it } from 'vitest';
import { parseSandboxProfile, type SandboxProfile, type SandboxProfileStatus } from '../../src/api/v1alpha1/index.js';
import { nextProfileStatus } from '../../src/profiles/catalog.js';
import { loadConfig } from '../../src/config/index.js';
import { controllerOptions } from '../../src/operator.js';
import { poolPodTemplate } from '../../src/controller/warm-pool.js';
import { builtinProfile, resolveProfile } from '../../src/profiles/profile.js';
import { runtimeVolume } from '../../src/sandbox/runtime-configmap.js';

const config = loadConfig({});
const profile = (spec: Record<string, unknown>, name = 'datascience'): unknown => ({
  apiVersion: 'codemode.dev/v1alpha1',
  kind: 'SandboxProfile',
  metadata: { name, namespace: 'codemode', uid: 'uid-p' },
  spec,
});
const parsed = (spec: Record<string, unknown>, name?: string): SandboxProfile => {
  const r = parseSandboxProfile(profile(spec, name));
  if (!r.ok) throw new Error(r.message);
  return r.profile;
};

describe('parseSandboxProfile', () => {
  it.each<[string, Record<string, unknown>, string | undefined, RegExp]>([
    ['no image', {}, undefined, /spec\.image/],
    ['an image with a space', { image: 'a b' }, undefined, /container image reference/],
    ['min above max', { image: 'x:v1', warmPool: { min: 3, max: 1 } }, undefined, /min must not be above max/],
    ['a pool above the bound', { image: 'x:v1', warmPool: { min: 0, max: 51 } }, undefined, /warmPool\.max/],
    ['a module name with a space', { image: 'x:v1', preImport: ['numpy pandas'] }, undefined, /Python module name/],
    ['a bad quantity', { image: 'x:v1', resources: { memory: '1 GB' } }, undefined, /Kubernetes quantity/],
    ['a zero default (the kubelet reads it as no limit)', { image: 'x:v1', resources: { memory: '0' } }, undefined, /quantity above zero/],
    ['a zero maximum', { image: 'x:v1', maxResources: { cpu: '0m' } }, undefined, /quantity above zero/],
    ['a name too long for a label', { image: 'x:v1' }, 'p'.repeat(41), /at most 40 characters/],
    ['a node selector key with a space', { image: 'x:v1', nodeSelector: { 'sandbox pool': 'yes' } }, undefined, /label key/],
    ['a node selector value too long', { image: 'x:v1', nodeSelector: { pool: 'v'.repeat(64) } }, undefined, /nodeSelector/],
    [
      'more than 16 node labels',
      { image: 'x:v1', nodeSelector: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])) },
      undefined,
      /at most 16 labels/,
    ],
    ['a toleration with an unknown effect', { image: 'x:v1', tolerations: [{ key: 'sandbox', effect: 'NoRun' }] }, undefined, /tolerations/],
    [
      'operator Exists with a value',
      { image: 'x:v1', tolerations: [{ key: 'sandbox', operator: 'Exists', value: 'yes' }] },
      undefined,
      /Exists takes no value/,
    ],
    ['a toleration without key that is not Exists', { image: 'x:v1', tolerations: [{ value: 'yes' }] }, undefined, /without key needs operator Exists/],
    ['a workspace medium other than Disk or Memory', { image: 'x:v1', workspace: { medium: 'Ssd' } }, undefined, /workspace\.medium/],
    ['a workspace size that is no quantity', { image: 'x:v1', workspace: { sizeLimit: '2 GB' } }, undefined, /workspace\.sizeLimit/],
    ['17 tolerations', { image: 'x:v1', tolerations: Array.from({ length: 17 }, (_, i) => ({ key: `k${i}`, operator: 'Exists' })) }, undefined, /tolerations/],
  ])('refuses %s', (_n, spec, name, message) => {
    const r = parseSandboxProfile(profile(spec, name));
    expect(r.ok).toBe(false);
    expect(!r.ok && r.message).toMatch(message);
  });
});

describe('resolveProfile', () => {
  it.each<[string, Record<string, unknown>, Record<string, unknown>]>([
    [
      'only an image: the gateway settings fill the rest, no pool',
      { image: 'ds:v1' },
      {
        images: { python: 'ds:v1', bash: 'ds:v1', sh: 'ds:v1', node: 'ds:v1' },
        defaultCpu: config.defaultCpu,
        maxMemory: config.maxMemory,
        pool: { min: 0, max: 0 },
      },
    ],
    [
      'its own limits, pool and modules (duplicates dropped)',
      {
        image: 'ds:v1',
        resources: { cpu: '2', memory: '2Gi' },
        maxResources: { cpu: '4', memory: '8Gi' },
        warmPool: { min: 1, max: 4 },
        preImport: ['numpy', 'pandas', 'numpy'],
      },
      { defaultCpu: '2', defaultMemory: '2Gi', maxCpu: '4', maxMemory: '8Gi', pool: { min: 1, max: 4 }, preImport: ['numpy', 'pandas'] },
    ],
    ['a RuntimeClass', { image: 'ds:v1', runtimeClassName: 'gvisor' }, { runtimeClassName: 'gvisor' }],
    ["no workspace: the gateway's", { image: 'ds:v1' }, { workspaceMedium: 'Disk', workspaceSizeLimit: config.workspaceSizeLimit }],
    [
      'a workspace in memory, its size',
      { image: 'ds:v1', workspace: { medium: 'Memory', sizeLimit: '1Gi' } },
      { workspaceMedium: 'Memory', workspaceSizeLimit: '1Gi' },
    ],
    [
      'only a medium: the gateway’s size',
      { image: 'ds:v1', workspace: { medium: 'Memory' } },
      { workspaceMedium: 'Memory', workspaceSizeLimit: config.workspaceSizeLimit },
    ],
    [
      'where its pods run: node labels and tolerated taints',
      {
        image: 'ds:v1',
        nodeSelector: { 'node-role.example.com/sandbox': 'true', pool: 'a' },
        tolerations: [
          { key: 'node-role.example.com/sandbox', operator: 'Exists', effect: 'NoSchedule' },
          { key: 'dedicated', value: 'sandbox' },
        ],
      },
      {
        nodeSelector: { 'node-role.example.com/sandbox': 'true', pool: 'a' },
        tolerations: [
          { key: 'node-role.example.com/sandbox', operator: 'Exists', effect: 'NoSchedule' },
          { key: 'dedicated', value: 'sandbox' },
        ],
      },
    ],
  ])('%s', (_n, spec, expected) => {
    const r = resolveProfile(parsed(spec), config);
    expect('invalid' in r).toBe(false);
    if ('invalid' in r) return;
    const flat = { ...r.shape, pool: r.pool, preImport: r.preImport };
    expect(flat).toMatchObject(expected);
    expect(r).toMatchObject({ name: 'datascience', builtin: false, uid: 'uid-p' });
  });

  it.each<[Record<string, unknown>, RegExp]>([
    [{ image: 'ds:v1', resources: { memory: '16Gi' } }, /default memory 16Gi is above its maximum/],
    [{ image: 'ds:v1', resources: { cpu: '1' }, maxResources: { cpu: '500m' } }, /default cpu 1 is above its maximum 500m/],
    [{ image: 'ds:v1', resources: { memory: '512m' } }, /its default memory 512m is below the minimum of 16Mi: use at least 16Mi, e\.g\. 512Mi/],
    [{ image: 'ds:v1', resources: { memory: '1M' }, maxResources: { memory: '2M' } }, /its default memory 1M is below the minimum of 16Mi/],
  ])('refuses defaults above the maxima: %j', (spec, message) => {
    const r = resolveProfile(parsed(spec), config);
    expect('invalid' in r && r.invalid).toMatch(message);
  });

  it.each<[string, Record<string, unknown>]>([
    ['none given', { image: 'ds:v1' }],
    ['empty ones', { image: 'ds:v1', nodeSelector: {}, tolerations: [] }],
  ])('places its pods anywhere with %s (no nodeSelector or tolerations in the shape)', (_n, spec) => {
    const r = resolveProfile(parsed(spec), config);
    if ('invalid' in r) throw new Error(r.invalid);
    expect(r.shape).not.toHaveProperty('nodeSelector');
    expect(r.shape).not.toHaveProperty('tolerations');
  });

  it('builds the built-in profile from the gateway settings', () => {
    expect(builtinProfile(config)).toMatchObject({ name: 'default', builtin: true, pool: { min: config.warmPoolMin, max: config.warmPoolMax }, preImport: [] });
  });
});

describe("a profile's pool pods", () => {
  const opts = controllerOptions(config, 'r');
  const volume = runtimeVolume({ 'python/kernel.py': 'x' });
  const r = resolveProfile(parsed({ image: 'ds:v1', resources: { memory: '2Gi' }, maxResources: { memory: '4Gi' }, preImport: ['numpy', 'pandas'] }), config);
  if ('invalid' in r) throw new Error(r.invalid);
  const pod = poolPodTemplate(opts, volume, r);
  const builtin = poolPodTemplate(opts, volume);

  it('carry the profile: label, name, owner, image, limits and the modules to pre-import', () => {
    expect(pod.metadata?.labels?.['codemode.dev/profile']).toBe('datascience');
    expect(pod.metadata?.generateName).toBe('codemode-pool-datascience-');
    expect(pod.metadata?.ownerReferences).toEqual([{ apiVersion: 'codemode.dev/v1alpha1', kind: 'SandboxProfile', name: 'datascience', uid: 'uid-p' }]);
    expect(pod.spec?.containers[0]?.image).toBe('ds:v1');
    expect(pod.spec?.containers[0]?.resources?.limits?.memory).toBe('2Gi');
    expect(pod.spec?.containers[0]?.command).toEqual(expect.arrayContaining(['--prestart', '--preimport', 'numpy,pandas']));
  });

  it('run where the profile says: its node labels and tolerations, and a change of either is a new template', () => {
    const placed = resolveProfile(
      parsed({ image: 'ds:v1', nodeSelector: { pool: 'sandbox' }, tolerations: [{ key: 'dedicated', operator: 'Exists', effect: 'NoSchedule' }] }),
      config,
    );
    const moved = resolveProfile(
      parsed({ image: 'ds:v1', nodeSelector: { pool: 'other' }, tolerations: [{ key: 'dedicated', operator: 'Exists', effect: 'NoSchedule' }] }),
      config,
    );
    const plain = resolveProfile(parsed({ image: 'ds:v1' }), config);
    if ('invalid' in placed || 'invalid' in moved || 'invalid' in plain) throw new Error('invalid');
    const p = poolPodTemplate(opts, volume, placed);
    expect(p.spec?.nodeSelector).toEqual({ pool: 'sandbox' });
    expect(p.spec?.tolerations).toEqual([{ key: 'dedicated', operator: 'Exists', effect: 'NoSchedule' }]);
    const hash = (x: typeof p): string | undefined => x.metadata?.labels?.['codemode.dev/pool-hash'];
    expect(new Set([hash(p), hash(poolPodTemplate(opts, volume, moved)), hash(poolPodTemplate(opts, volume, plain))]).size).toBe(3);
    expect(poolPodTemplate(opts, volume, plain).spec).not.toHaveProperty('nodeSelector');
  });

  it("keep the profile's /workspace, and a change of its medium is a new template", () => {
    const inMemory = resolveProfile(parsed({ image: 'ds:v1', workspace: { medium: 'Memory', sizeLimit: '1Gi' } }), config);
    const onDisk = resolveProfile(parsed({ image: 'ds:v1', workspace: { sizeLimit: '1Gi' } }), config);
    if ('invalid' in inMemory || 'invalid' in onDisk) throw new Error('invalid');
    const m = poolPodTemplate(opts, volume, inMemory);
    const d = poolPodTemplate(opts, volume, onDisk);
    const workspace = (x: typeof m) => x.spec?.volumes?.find((v) => v.name === 'workspace')?.emptyDir;
    expect(workspace(m)).toEqual({ medium: 'Memory', sizeLimit: '1Gi' });
    expect(workspace(d)).toEqual({ sizeLimit: '1Gi' });
    expect(m.metadata?.labels?.['codemode.dev/pool-hash']).not.toBe(d.metadata?.labels?.['codemode.dev/pool-hash']);
  });

  it("keep the built-in profile's pods as they were named, without an owner, and hash apart", () => {
    expect(builtin.metadata?.labels?.['codemode.dev/profile']).toBe('default');
    expect(builtin.metadata?.generateName).toBe('codemode-pool-python-');
    expect(builtin.metadata?.ownerReferences).toBeUndefined();
    expect(builtin.spec?.containers[0]?.command).not.toContain('--preimport');
    expect(pod.metadata?.labels?.['codemode.dev/pool-hash']).not.toBe(builtin.metadata?.labels?.['codemode.dev/pool-hash']);
  });
});

describe('nextProfileStatus (the leader writes a profile status only when it changes)', () => {
  const now = new Date('2026-11-24T06:00:00Z');
  const written = nextProfileStatus(undefined, 3, undefined, { ready: 1, target: 2 }, now);
  // As the API server returns it: keys sorted, as Go encodes maps.
  const sortedKeys = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(sortedKeys)
      : v && typeof v === 'object'
        ? Object.fromEntries(
            Object.keys(v)
              .sort()
              .map((k) => [k, sortedKeys((v as Record<string, unknown>)[k])]),
          )
        : v;
  const cached = sortedKeys(written) as SandboxProfileStatus;

  it.each<[string, Parameters<typeof nextProfileStatus>, boolean]>([
    ['the same status in the API server’s key order', [cached, 3, undefined, { ready: 1, target: 2 }, new Date('2026-11-24T07:00:00Z')], false],
    ['a pod more', [cached, 3, undefined, { ready: 2, target: 2 }, now], true],
    ['a new generation', [cached, 4, undefined, { ready: 1, target: 2 }, now], true],
    ['the spec became invalid', [cached, 3, 'its default memory 1Gi is above its maximum 512Mi', { ready: 1, target: 2 }, now], true],
    ['nothing written yet', [undefined, 3, undefined, { ready: 0, target: 0 }, now], true],
  ])('%s → write: %s', (_n, args, write) => {
    expect(nextProfileStatus(...args) !== undefined).toBe(write);
  });

  it('says why an invalid profile cannot be used, with no pool counts, and keeps the transition time while unchanged', () => {
    const invalid = nextProfileStatus(cached, 3, 'bad spec', { ready: 1, target: 2 }, now);
    expect(invalid).toMatchObject({
      readyPods: 0,
      targetPods: 0,
      conditions: [{ type: 'Ready', status: 'False', reason: 'InvalidSpec', message: 'bad spec' }],
    });
    const later = nextProfileStatus(invalid, 3, 'bad spec', { ready: 3, target: 3 }, new Date('2026-11-24T08:00:00Z'));
    expect(later).toBeUndefined();
  });
});
