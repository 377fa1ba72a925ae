import { V1MicroTime, type V1Lease } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { canAcquire, observe, pastRenewDeadline, type Observation } from '../../../src/controller/leader.js';

// Wall-clock renewTimes deliberately far from the local clock: skew must not matter.
const lease = (holder: string, renewTimeMs = Date.UTC(2001, 0, 1), duration = 15): V1Lease => ({
  metadata: { resourceVersion: '1' },
  spec: { holderIdentity: holder, leaseDurationSeconds: duration, renewTime: new V1MicroTime(renewTimeMs) },
});

describe('canAcquire (judged by the local clock since the record last changed)', () => {
  const seenAt = (atMs: number): Observation => ({ record: 'x', atMs });
  it.each([
    ['no lease', undefined, 0, 1_000, true],
    ['our own lease', lease('me'), 0, 1_000, true],
    ['released lease', lease(''), 0, 1_000, true],
    ["someone else's, seen changing 5 s ago", lease('other'), 0, 5_000, false],
    ["someone else's, unchanged for 14.9 s", lease('other'), 0, 14_900, false],
    ["someone else's, unchanged for 15 s", lease('other'), 0, 15_000, true],
    ["someone else's with a 60 s lease, unchanged for 20 s", lease('other', Date.UTC(2001, 0, 1), 60), 0, 20_000, false],
    // A renewTime hours in the past (skewed clock) is not "expired" if we saw it change just now.
    ["someone else's, renewTime far in the past but just observed", lease('other', Date.UTC(1990, 0, 1)), 9_000, 10_000, false],
  ])('%s', (_n, l, atMs, nowMs, expected) => {
    expect(canAcquire(l, 'me', seenAt(atMs), nowMs)).toBe(expected);
  });
});

describe('observe', () => {
  it.each([
    ['first sight', undefined, lease('a', 1000), 50, 50],
    ['a deleted lease is a change', { record: 'a|15||2001|', atMs: 10 }, undefined, 50, 50],
  ])('%s', (_n, prev, l, nowMs, expectedAt) => {
    expect(observe(prev, l, nowMs).atMs).toBe(expectedAt);
  });

  it('keeps the time while the record stays the same and resets it when it changes', () => {
    const first = observe(undefined, lease('a', 1000), 100);
    expect(observe(first, lease('a', 1000), 5_000).atMs).toBe(100);
    expect(observe(first, lease('a', 2000), 5_000).atMs).toBe(5_000);
    expect(observe(first, lease('b', 1000), 6_000).atMs).toBe(6_000);
  });
});

describe('pastRenewDeadline', () => {
  it.each([
    ['never renewed', undefined, 0, true],
    ['renewed 2 s ago', 8_000, 10_000, false],
    ['renewed 9.9 s ago', 100, 10_000, false],
    ['renewed 10 s ago', 0, 10_000, true],
  ])('%s', (_n, last, nowMs, expected) => {
    expect(pastRenewDeadline(last, nowMs, 10_000)).toBe(expected);
  });
});
