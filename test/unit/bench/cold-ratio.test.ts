// The cold row's ratio against the pod floor: from the pairs when measured in pairs, else the medians.
import { describe, expect, it } from 'vitest';
import { coldVsPodFloor } from '../../../bench/report.js';
import type { Summary } from '../../../bench/stats.js';

const s = (median: number): Summary => ({ n: 40, median, p95: median, p99: median, min: median, max: median, mean: median });
const lat = (median: number) => ({ ms: s(median), errors: 0 });

describe('cold vs pod floor', () => {
  it.each<[string, number | string, number | string, number | undefined, number | null]>([
    ['medians alone', 1100, 1000, undefined, 1.1],
    ['pairs: the floor median plus the pairs’ median difference', 1300, 1000, 40, 1.04],
    ['pairs faster than the floor', 1000, 1000, -20, 0.98],
    ['no floor', 1100, 'not measured', 40, null],
    ['no cold row', 'not measured', 1000, undefined, null],
  ])('%s', (_what, cold, floor, paired, expected) => {
    const r = {
      cold: typeof cold === 'string' ? cold : lat(cold),
      rawPodFloor: typeof floor === 'string' ? floor : { ...lat(floor), phasesMs: {} as never },
      profile: paired === undefined ? {} : { coldMinusFloorPairedMs: s(paired) },
    };
    expect(coldVsPodFloor(r)).toBe(expected);
  });
});
