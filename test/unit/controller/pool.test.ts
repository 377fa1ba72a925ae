import type { V1ConfigMap, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import {
  CreateExpectations,
  isReserved,
  isWarm,
  planPool,
  poolPodDeadlineSeconds,
  readySeconds,
  refillDeferralMs,
  reservedBy,
  startingPodWaitMs,
} from '../../../src/controller/pool-plan.js';
import { DecayingRate, PoolDemand, desiredPoolSize, stabilize } from '../../../src/controller/pool-sizing.js';
import { ANNOTATION_UNUSED_SINCE } from '../../../src/controller/runtime-guard.js';
import { mountedConfigMaps, sweepAction } from '../../../src/controller/runtime-sweep.js';

const T0 = Date.parse('2026-11-23T12:00:00Z');
const iso = (ms: number): string => new Date(ms).toISOString();

let n = 0;
function poolPod(
  o: {
    hash?: string;
    state?: 'ready' | 'pending' | 'failed';
    claimed?: boolean;
    /** Reserved by this replica hash: the annotation on a pod still labelled warm. */
    reservedBy?: string;
    deleting?: boolean;
    createdMs?: number;
    uid?: string;
  } = {},
): V1Pod {
  const state = o.state ?? 'ready';
  return {
    metadata: {
      name: `p${++n}`,
      uid: o.uid ?? `u${n}`,
      resourceVersion: '1',
      creationTimestamp: new Date(o.createdMs ?? T0 - 60_000),
      labels: { 'codemode.dev/pool': o.claimed ? 'claimed' : 'warm', 'codemode.dev/pool-hash': o.hash ?? 'h1' },
      ...(o.reservedBy !== undefined && { annotations: { 'codemode.dev/reserved-by': o.reservedBy } }),
      ...(o.deleting ? { deletionTimestamp: new Date(T0) } : {}),
    },
    status:
      state === 'failed'
        ? { phase: 'Failed', reason: 'Evicted', message: 'evicted' }
        : { phase: state === 'ready' ? 'Running' : 'Pending', conditions: [{ type: 'Ready', status: state === 'ready' ? 'True' : 'False' }] },
  };
}

describe('planPool', () => {
  const base = { hash: 'h1', target: 2, nowMs: T0, maxAgeMs: 3_600_000, pending: 0 };
  it.each([
    ['empty pool: create the target', [], {}, 2, []],
    ['full', [poolPod(), poolPod({ state: 'pending' })], {}, 0, []],
    ['claimed and deleting pods do not count', [poolPod(), poolPod({ claimed: true }), poolPod({ deleting: true })], {}, 1, []],
    ['pods already created but not seen yet count', [poolPod()], { pending: 1 }, 0, []],
    ['a pod of another hash is replaced, never kept', [poolPod({ hash: 'old' }), poolPod()], {}, 1, ['stale']],
    ['a failed pod is replaced', [poolPod({ state: 'failed' }), poolPod()], {}, 1, ['failed']],
    ['a pod past the pool lifetime is replaced', [poolPod({ createdMs: T0 - 3_600_001 }), poolPod()], {}, 1, ['expired']],
    ['surplus above the target is deleted', [poolPod(), poolPod(), poolPod()], {}, 0, ['surplus']],
    [
      'target 0 drains every unclaimed pod, any version',
      [poolPod(), poolPod({ hash: 'old' }), poolPod({ state: 'pending' })],
      { target: 0 },
      0,
      ['stale', 'surplus', 'surplus'],
    ],
    ['draining never touches claimed pods', [poolPod({ claimed: true }), poolPod({ claimed: true, hash: 'old' })], { target: 0 }, 0, []],
    // A process's reservation is its own (any version, even with the pool drained), until its deadline fails it.
    [
      'reserved pods neither count nor go',
      [poolPod({ reservedBy: 'r' }), poolPod({ reservedBy: 'r', hash: 'old' }), poolPod({ reservedBy: 'r', createdMs: T0 - 3_600_001 }), poolPod()],
      {},
      1,
      [],
    ],
    ['reserved pods stay when the pool drains', [poolPod({ reservedBy: 'r' })], { target: 0 }, 0, []],
    ['a reservation past its deadline (the pod failed) is deleted', [poolPod({ reservedBy: 'r', state: 'failed' }), poolPod(), poolPod()], {}, 0, ['failed']],
  ])('%s', (_n, pods, over, create, causes) => {
    const plan = planPool(pods as V1Pod[], { ...base, ...over });
    expect(plan.create).toBe(create);
    expect(plan.remove.map((r) => r.cause).sort()).toEqual([...causes].sort());
  });

  it('gives up starting pods before ready ones, and the oldest ready ones first', () => {
    const oldReady = poolPod({ createdMs: T0 - 120_000 });
    const newReady = poolPod({ createdMs: T0 - 10_000 });
    const starting = poolPod({ state: 'pending' });
    const plan = planPool([newReady, starting, oldReady], { ...base, target: 1 });
    expect(plan.remove.map((r) => r.pod)).toEqual([starting, oldReady]);
    expect(plan.readyCurrent).toBe(1);
  });
});

describe('reservedBy, isWarm, isReserved', () => {
  const meta = (labels: Record<string, string>, annotations?: Record<string, string>, deleting = false): V1Pod => ({
    metadata: { labels, ...(annotations && { annotations }), ...(deleting && { deletionTimestamp: new Date(T0) }) },
  });
  it.each<[string, V1Pod, string | undefined, boolean, boolean]>([
    ['warm, unreserved', meta({ 'codemode.dev/pool': 'warm' }), undefined, true, false],
    [
      'relabelled pool=reserved (as releases up to 0922e5e reserved): neither, never claimed',
      meta({ 'codemode.dev/pool': 'reserved', 'codemode.dev/reserved-by': 'abc' }),
      undefined,
      false,
      false,
    ],
    ['reserved by annotation on a warm pod (as written now)', meta({ 'codemode.dev/pool': 'warm' }, { 'codemode.dev/reserved-by': 'abc' }), 'abc', false, true],
    ['an empty annotation still reserves', meta({ 'codemode.dev/pool': 'warm' }, { 'codemode.dev/reserved-by': '' }), '', false, true],
    [
      'claimed: the annotation left on it does not matter',
      meta({ 'codemode.dev/pool': 'claimed' }, { 'codemode.dev/reserved-by': 'abc' }),
      undefined,
      false,
      false,
    ],
    ['being deleted: neither', meta({ 'codemode.dev/pool': 'warm' }, { 'codemode.dev/reserved-by': 'abc' }, true), 'abc', false, false],
    ['not a pool pod', meta({}), undefined, false, false],
  ])('%s', (_name, pod, by, warm, reserved) => {
    expect(reservedBy(pod)).toBe(by);
    expect(isWarm(pod)).toBe(warm);
    expect(isReserved(pod)).toBe(reserved);
  });
});

describe('desiredPoolSize', () => {
  it.each([
    ['no demand: the minimum', { min: 2, max: 8, claimsPerSecond: 0, readySeconds: 2 }, 2],
    ['one claim now and then stays at the minimum', { min: 2, max: 8, claimsPerSecond: 0.2, readySeconds: 2 }, 2],
    ['2 claims/s × 2 s to ready × 1.5', { min: 2, max: 8, claimsPerSecond: 2, readySeconds: 2 }, 6],
    ['rounds up', { min: 1, max: 8, claimsPerSecond: 1, readySeconds: 1.5 }, 3],
    ['exact products are not rounded up by float noise', { min: 1, max: 8, claimsPerSecond: 2, readySeconds: 1, headroom: 0 }, 2],
    ['clamped to the maximum', { min: 2, max: 8, claimsPerSecond: 10, readySeconds: 3 }, 8],
    ['no headroom', { min: 0, max: 8, claimsPerSecond: 2, readySeconds: 2, headroom: 0 }, 4],
    ['maximum 0 drains whatever the demand', { min: 0, max: 0, claimsPerSecond: 10, readySeconds: 3 }, 0],
    ['negative inputs are no demand', { min: 1, max: 8, claimsPerSecond: -1, readySeconds: 2 }, 1],
  ])('%s', (_n, input, size) => {
    expect(desiredPoolSize(input)).toBe(size);
  });
});

describe('stabilize', () => {
  it.each([
    ['first value', undefined, 3, 0, { size: 3, sinceMs: 0 }],
    ['grows at once', { size: 3, sinceMs: 0 }, 5, 1000, { size: 5, sinceMs: 1000 }],
    ['holds a larger size within the window', { size: 5, sinceMs: 0 }, 2, 119_999, { size: 5, sinceMs: 0 }],
    ['shrinks after the window', { size: 5, sinceMs: 0 }, 2, 120_000, { size: 2, sinceMs: 120_000 }],
    ['the same size renews the window', { size: 5, sinceMs: 0 }, 5, 60_000, { size: 5, sinceMs: 60_000 }],
  ])('%s', (_n, prev, next, now, out) => {
    expect(stabilize(prev, next, now)).toEqual(out);
  });
});

describe('DecayingRate', () => {
  it('counts a burst at once and lets it fade', () => {
    const r = new DecayingRate(5000);
    for (let i = 0; i < 10; i++) r.add(T0);
    expect(r.perSecond(T0)).toBeCloseTo(2, 9); // 10 claims / 5 s
    expect(r.perSecond(T0 + 5000)).toBeCloseTo(2 / Math.E, 9);
    expect(r.perSecond(T0 + 60_000)).toBeLessThan(0.001);
  });

  it('approaches a steady rate', () => {
    const r = new DecayingRate(5000);
    for (let t = 0; t < 60_000; t += 250) r.add(T0 + t); // 4 per second
    expect(r.perSecond(T0 + 60_000)).toBeGreaterThan(3.8);
    expect(r.perSecond(T0 + 60_000)).toBeLessThan(4.3);
  });
});

describe('PoolDemand', () => {
  const ready = (createdMs: number, readyMs: number, o: { claimed?: boolean; uid?: string } = {}): V1Pod => {
    const p = poolPod({ createdMs, ...o });
    return { ...p, status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: new Date(readyMs) }] } };
  };

  it('grows with claims seen after priming, measures time to ready, ignores other pods', () => {
    const d = new PoolDemand();
    d.observe(ready(T0, T0 + 4000, { claimed: true, uid: 'before' }), T0); // listed at start: not a new claim
    d.prime();
    expect(d.target({ min: 2, max: 20 }, T0)).toBe(2);
    expect(d.readySeconds).toBeCloseTo(2 + 0.2 * (4 - 2), 9);
    for (let i = 0; i < 10; i++) d.observe(ready(T0, T0 + 4000, { claimed: true, uid: `c${i}` }), T0);
    d.observe(ready(T0, T0 + 4000, { claimed: true, uid: 'c0' }), T0); // the same claim seen again
    d.observe({ metadata: { uid: 'x', labels: { 'codemode.dev/pool': 'claimed' } } }, T0); // not a pool pod
    expect(d.claimsPerSecond(T0)).toBeCloseTo(2, 9);
    const grown = d.target({ min: 2, max: 20 }, T0);
    expect(grown).toBeGreaterThan(2);
    // Demand gone: the larger pool stays for the stabilisation window, then shrinks.
    expect(d.target({ min: 2, max: 20 }, T0 + 60_000)).toBe(grown);
    expect(d.target({ min: 2, max: 20 }, T0 + 121_000)).toBe(2);
    expect(d.target({ min: 0, max: 0 }, T0 + 1)).toBe(0);
  });

  it('counts a reservation as a claim, and the same pod adopted later not again', () => {
    const d = new PoolDemand();
    d.prime();
    for (let i = 0; i < 5; i++) d.observe(poolPod({ reservedBy: 'h', uid: `r${i}` }), T0);
    expect(d.claimsPerSecond(T0)).toBeCloseTo(1, 9);
    // A run that outlived the Running write's delay: its reserved pod relabelled `claimed`.
    for (let i = 0; i < 5; i++) d.observe(poolPod({ claimed: true, uid: `r${i}` }), T0);
    d.observe(poolPod({ uid: 'w' }), T0); // unclaimed: no demand
    expect(d.claimsPerSecond(T0)).toBeCloseTo(1, 9);
  });
});

describe('refillDeferralMs', () => {
  const base = { readyWarm: 1, busyRuns: 1, shortSinceMs: 10_000, nowMs: 10_200, deferMs: 1000 };
  it.each([
    ['a ready pod left and a run executing: waits out the rest of the deferral', {}, 800],
    ['deferral used up', { nowMs: 11_000 }, 0],
    ['past the deferral', { nowMs: 12_500 }, 0],
    ['the pool is empty: callers go cold, so at once', { readyWarm: 0 }, 0],
    ['no run executing in a claimed pod: at once', { busyRuns: 0 }, 0],
    ['deferral disabled', { deferMs: 0 }, 0],
  ])('%s', (_n, over, ms) => {
    expect(refillDeferralMs({ ...base, ...over })).toBe(ms);
  });
});

describe('startingPodWaitMs', () => {
  // Now 100 s; the limit 10 s. A pod created at 99 s is 1 s old: 9 s left before it counts as stuck.
  const base = { startingCreatedMs: [99_000], waiting: 0, nowMs: 100_000, waitedMs: 0, limitMs: 10_000 };
  it.each([
    ['one young pod starting, nobody waiting: wait until it would count as stuck', {}, 9_000],
    ['no pod starting: cold now', { startingCreatedMs: [] }, undefined],
    ['the only starting pod is already waited for by another claim: cold now', { waiting: 1 }, undefined],
    ['two starting, one claim waiting: the second claim waits for the older one', { startingCreatedMs: [99_000, 95_000], waiting: 1 }, 5_000],
    ['two starting, nobody waiting: bounded by the younger', { startingCreatedMs: [95_000, 99_000] }, 9_000],
    ['a pod starting for longer than the limit is stuck: cold now', { startingCreatedMs: [89_000] }, undefined],
    ['a stuck pod does not count toward the waiters', { startingCreatedMs: [89_000, 99_000], waiting: 1 }, undefined],
    ['waited 8 s already: at most the 2 s left of the limit', { waitedMs: 8_000 }, 2_000],
    ['waited the whole limit: cold now', { waitedMs: 10_000 }, undefined],
    ['created "in the future" (API server clock ahead): counts as new', { startingCreatedMs: [103_000] }, 10_000],
  ])('%s', (_n, over, ms) => {
    expect(startingPodWaitMs({ ...base, ...over })).toBe(ms);
  });
});

describe('CreateExpectations', () => {
  it('counts created pods until the informer shows them', () => {
    const e = new CreateExpectations(30_000);
    e.created('pool-a', 0);
    e.created('pool-b', 10);
    expect(e.pending([], 20)).toBe(2);
    expect(e.pending(['pool-a', 'other'], 30)).toBe(1);
    // Seen once is enough: a pod that is later claimed or deleted is not expected again.
    expect(e.pending(['pool-b'], 40)).toBe(0);
    expect(e.pending([], 50)).toBe(0);
  });

  it('gives up on a pod that never shows up', () => {
    const e = new CreateExpectations(30_000);
    e.created('lost', 0);
    expect(e.pending([], 30_000)).toBe(1);
    expect(e.pending([], 30_001)).toBe(0);
  });
});

describe('pool pod lifetime', () => {
  it.each([
    [
      'sessions are the longest claim',
      { poolLifetimeSeconds: 3600, sessionMaxLifetimeSeconds: 86400, podStartupTimeoutSeconds: 120, maxTimeoutSeconds: 300 },
      3600 + 86460,
    ],
    [
      'runs are the longest claim',
      { poolLifetimeSeconds: 3600, sessionMaxLifetimeSeconds: 60, podStartupTimeoutSeconds: 120, maxTimeoutSeconds: 3600 },
      3600 + 3780,
    ],
  ])('deadline covers the pool lifetime and the longest claim: %s', (_n, input, seconds) => {
    expect(poolPodDeadlineSeconds(input)).toBe(seconds);
  });

  it.each([
    [
      'ready 3 s after creation',
      { metadata: { creationTimestamp: new Date(T0) }, status: { conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: new Date(T0 + 3000) }] } },
      3,
    ],
    [
      'not ready',
      { metadata: { creationTimestamp: new Date(T0) }, status: { conditions: [{ type: 'Ready', status: 'False', lastTransitionTime: new Date(T0 + 3000) }] } },
      undefined,
    ],
    ['no creation time', { metadata: {}, status: { conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: new Date(T0) }] } }, undefined],
  ])('readySeconds: %s', (_n, pod, s) => {
    expect(readySeconds(pod as V1Pod)).toBe(s);
  });
});

describe('runtime ConfigMap sweep', () => {
  const cm = (name: string, unusedSince?: string): V1ConfigMap => ({
    metadata: { name, ...(unusedSince !== undefined ? { annotations: { [ANNOTATION_UNUSED_SINCE]: unusedSince } } : {}) },
  });
  const p = { current: 'codemode-runtime-new', mounted: new Set(['codemode-runtime-busy']), nowMs: T0 };
  it.each([
    ['ours is kept', cm('codemode-runtime-new', iso(T0 - 3_600_000)), 'keep'],
    ['mounted by a pod: kept', cm('codemode-runtime-busy', iso(T0 - 3_600_000)), 'keep'],
    ['unused and unmarked: marked first', cm('codemode-runtime-old'), 'mark'],
    ['marked within the grace period: kept', cm('codemode-runtime-old', iso(T0 - 60_000)), 'keep'],
    ['marked longer than the grace period: deleted', cm('codemode-runtime-old', iso(T0 - 600_000)), 'delete'],
    ['an unreadable mark is rewritten', cm('codemode-runtime-old', 'yesterday'), 'mark'],
  ])('%s', (_n, c, action) => {
    expect(sweepAction(c, p)).toBe(action);
  });

  it('finds the ConfigMaps pods mount', () => {
    const pods: V1Pod[] = [
      {
        spec: {
          containers: [],
          volumes: [
            { name: 'runtime', configMap: { name: 'a' } },
            { name: 'w', emptyDir: {} },
          ],
        },
      },
      { spec: { containers: [] } },
    ];
    expect([...mountedConfigMaps(pods)]).toEqual(['a']);
  });
});

describe('PoolDemand counts cold pods the pool could have served', () => {
  it('as demand, like claims', () => {
    const d = new PoolDemand((p) => p.metadata?.labels?.servable === 'yes');
    d.prime();
    d.observe({ metadata: { uid: 'a', labels: { servable: 'yes' } } }, T0);
    d.observe({ metadata: { uid: 'a', labels: { servable: 'yes' } } }, T0);
    d.observe({ metadata: { uid: 'b', labels: { servable: 'no' } } }, T0);
    expect(d.claimsPerSecond(T0)).toBeCloseTo(0.2, 9);
  });

  it('adds the refill deferral to the time a replacement takes', () => {
    const d = new PoolDemand();
    d.prime();
    for (let i = 0; i < 5; i++) d.observe(poolPod({ claimed: true, uid: `k${i}` }), T0); // 1 claim/s
    // 1/s × (2 s to ready + 2 s deferral) × 1.5 = 6
    expect(d.target({ min: 1, max: 20 }, T0, 2)).toBe(6);
  });
});
