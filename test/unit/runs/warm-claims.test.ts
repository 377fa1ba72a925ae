import type { V1OwnerReference, V1Pod } from '@kubernetes/client-node';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { SandboxRun } from '../../../src/api/v1alpha1/index.js';
import { WarmClaims, claimTerms, type PoolClaims } from '../../../src/runs/warm-claims.js';

const IMAGE = 'codemode/sandbox:dev';
const opts = { images: { python: IMAGE, node: IMAGE, bash: IMAGE, sh: IMAGE }, podStartupTimeoutSeconds: 60 };

function run(spec: Partial<SandboxRun['spec']> = {}, name = 'r1'): SandboxRun {
  return {
    apiVersion: 'codemode.dev/v1alpha1',
    kind: 'SandboxRun',
    metadata: { name, namespace: 'ns', uid: `uid-${name}` },
    spec: { language: 'python', code: 'print(1)', timeoutSeconds: 30, ...spec },
  };
}

const pod = (name: string): V1Pod => ({ metadata: { name, namespace: 'ns' } });

/** A pool (the warm pool's port, src/controller/warm-pool.ts) that records what it was asked. */
function pool(has: { reserved?: V1Pod; ready?: V1Pod; enabled?: boolean } = {}) {
  const asked: string[] = [];
  const claims: Array<{ owner: V1OwnerReference; labels: Record<string, string>; deadline: number }> = [];
  let reserved = has.reserved;
  const p: PoolClaims = {
    enabled: has.enabled ?? true,
    claim: async (owner, labels, deadline) => {
      claims.push({ owner, labels, deadline });
      return has.ready;
    },
    takeReserved: async () => {
      const r = reserved;
      reserved = undefined;
      return r;
    },
    adopt: async (p, owner, labels, deadline) => {
      asked.push(`adopt ${p.metadata?.name}`);
      claims.push({ owner, labels, deadline });
    },
    ensureReserved: () => void asked.push('ensureReserved'),
  };
  return { p, asked, claims };
}

const claims = (pools: Record<string, PoolClaims>): WarmClaims => {
  const w = new WarmClaims(pino({ level: 'silent' }));
  w.setPools({ pool: (profile) => pools[profile] });
  return w;
};

describe('claimTerms', () => {
  it.each([
    ['python', run(), { 'codemode.dev/run': 'r1', 'codemode.dev/runtime': 'python' }, 60 + 30 + 60],
    [
      'javascript runs as node',
      run({ language: 'javascript', timeoutSeconds: 300 }),
      { 'codemode.dev/run': 'r1', 'codemode.dev/runtime': 'node' },
      60 + 300 + 60,
    ],
  ])('%s', (_, r, labels, deadline) => {
    const t = claimTerms(r, opts);
    expect(t.owner).toEqual({ apiVersion: 'codemode.dev/v1alpha1', kind: 'SandboxRun', name: 'r1', uid: 'uid-r1', controller: true, blockOwnerDeletion: true });
    expect(t.labels).toEqual(labels);
    expect(t.deadline).toBe(deadline);
  });

  it('a run name too long for a label gets a shortened label value, the owner keeps the full name', () => {
    const name = `r-${'x'.repeat(80)}`;
    const t = claimTerms(run({}, name), opts);
    expect(t.owner.name).toBe(name);
    expect(t.labels['codemode.dev/run']!.length).toBeLessThanOrEqual(63);
  });
});

describe('WarmClaims.poolFor', () => {
  it.each([
    ['the profile has no pool', {}, run(), false],
    ['its pool is off (size 0)', { default: pool({ enabled: false }).p }, run(), false],
    ['the run asks for its own resources', { default: pool().p }, run({ resources: { memory: '1Gi' } }), false],
    ['the pool pods fit', { default: pool().p }, run(), true],
  ])('%s → %s', (_, pools, r, fits) => {
    expect(claims(pools).poolFor(r, 'default', opts) !== undefined).toBe(fits);
  });

  it("a runtime whose image is not python's does not fit the pool's pods", () => {
    const w = claims({ default: pool().p });
    expect(w.poolFor(run({ language: 'bash' }), 'default', { ...opts, images: { ...opts.images, bash: 'other:1' } })).toBeUndefined();
  });
});

describe('WarmClaims.claim', () => {
  it("takes this process's reserved pod without a write, and adopts it once however often asked", async () => {
    const { p, asked, claims: seen } = pool({ reserved: pod('reserved-1'), ready: pod('ready-1') });
    const w = claims({ default: p });
    expect(await w.claim(run(), 'default', opts)).toBe('reserved-1');
    expect(asked).toEqual([]);
    const adoption = w.take('uid-r1');
    expect(w.take('uid-r1')).toBeUndefined();
    // A run that ends before its Running write has nothing to wait for: its pod is never relabelled.
    expect(adoption?.adopting?.()).toBeUndefined();
    await Promise.all([adoption?.adopt?.(), adoption?.adopt?.()]);
    expect(asked).toEqual(['adopt reserved-1']);
    await adoption?.adopting?.();
    expect(adoption?.adopting?.()).toBeInstanceOf(Promise);
    expect(seen).toEqual([claimTerms(run(), opts)]);
    adoption?.pool.ensureReserved();
    expect(asked).toEqual(['adopt reserved-1', 'ensureReserved']);
  });

  it('claims a ready pool pod with the run as its owner when none is reserved; nothing to adopt later', async () => {
    const { p, claims: seen } = pool({ ready: pod('ready-1') });
    const w = claims({ default: p });
    expect(await w.claim(run(), 'default', opts)).toBe('ready-1');
    expect(seen).toEqual([claimTerms(run(), opts)]);
    const adoption = w.take('uid-r1');
    expect(adoption?.pool).toBe(p);
    expect(adoption?.adopt).toBeUndefined();
  });

  it('finds no pod when the pool has none ready: the run goes cold, nothing kept', async () => {
    const w = claims({ default: pool().p });
    expect(await w.claim(run(), 'default', opts)).toBeUndefined();
    expect(w.take('uid-r1')).toBeUndefined();
  });

  it('forget drops what a run had left to do', async () => {
    const w = claims({ default: pool({ reserved: pod('reserved-1') }).p });
    await w.claim(run(), 'default', opts);
    w.forget('uid-r1');
    expect(w.take('uid-r1')).toBeUndefined();
  });
});
