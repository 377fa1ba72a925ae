// The bench's cold row and pod floor start their calls at the same phases of the kubelet's relist.
import { describe, expect, it } from 'vitest';
import { relistOffsetMs, relistWaitMs } from '../../../bench/relist-phase.js';

describe('relist phases', () => {
  it.each([
    // [ms since the anchor, wanted offset, wait]
    [0, 0, 0],
    [0, 300, 300],
    [100, 300, 200],
    [300, 300, 0],
    [400, 300, 900],
    [1250, 300, 50],
    [2999, 0, 1],
  ])('%d ms after the anchor, phase %d: waits %d ms', (since, offset, wait) => {
    expect(relistWaitMs(since, offset, 1000)).toBeCloseTo(wait, 6);
  });

  it.each([[10], [40], [200]])('spreads %d consecutive calls over the whole period, one per bucket of period/n or close', (n) => {
    const offsets = Array.from({ length: n }, (_, i) => relistOffsetMs(i, 1000));
    for (const o of offsets) expect(o >= 0 && o < 1000).toBe(true);
    // Low discrepancy: every tenth of the period holds about a tenth of the calls.
    const perTenth = Array.from({ length: 10 }, (_, b) => offsets.filter((o) => o >= b * 100 && o < (b + 1) * 100).length);
    for (const c of perTenth) expect(Math.abs(c - n / 10)).toBeLessThanOrEqual(Math.max(1, n / 20));
  });
});
