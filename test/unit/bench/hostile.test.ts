// The hostile row's bookkeeping (bench/hostile.ts): which benign calls overlapped which attack,
// and which attacks BENCH_ATTACKS picks.
import { describe, expect, it } from 'vitest';
import { ATTACKS, attributeToAttacks, chosenAttacks } from '../../../bench/hostile.js';

describe('attributeToAttacks', () => {
  const attacks = [
    { name: 'cpu burn', start: 100, end: 200 },
    { name: 'fork bomb', start: 200, end: 300 },
    { name: 'cpu burn', start: 400, end: 500 },
  ];
  it.each([
    ['a call inside one attack counts for it', [{ start: 120, end: 130 }], { 'cpu burn': [10] }],
    ['a call across two attacks counts for both', [{ start: 190, end: 210 }], { 'cpu burn': [20], 'fork bomb': [20] }],
    ['a call across two runs of one attack counts once', [{ start: 150, end: 450 }], { 'cpu burn': [300], 'fork bomb': [300] }],
    ['a call between attacks counts for none', [{ start: 310, end: 390 }], {}],
    ['touching ends are no overlap', [{ start: 300, end: 400 }], {}],
  ])('%s', (_name, benign, expected) => {
    const got = attributeToAttacks(benign, attacks);
    expect(Object.fromEntries(Object.entries(got).map(([k, s]) => [k, [s.median]]))).toEqual(expected);
    for (const [k, ms] of Object.entries(expected)) expect(got[k]?.n).toBe(ms.length);
  });
});

describe('chosenAttacks', () => {
  it.each([
    [undefined, ATTACKS.map((a) => a.name)],
    ['', ATTACKS.map((a) => a.name)],
    ['cpu burn', ['cpu burn']],
    [' fork bomb , idle neighbour', ['fork bomb', 'idle neighbour']],
  ])('BENCH_ATTACKS=%j', (names, expected) => {
    expect(chosenAttacks(names).map((a) => a.name)).toEqual(expected);
  });

  it('names the choices when an attack is unknown', () => {
    expect(() => chosenAttacks('cpu burn,teapot')).toThrow(/no attack named teapot; choose from output flood, .*idle neighbour/);
  });
});
