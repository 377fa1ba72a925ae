import { describe, expect, it } from 'vitest';
import { gateState, inPodCheckDue, lastWrittenMs, type GateState } from '../../../src/controller/policy-gate.js';
import { createMetrics } from '../../../src/metrics/registry.js';

describe('gateState', () => {
  it.each<[string, number | undefined, number, number, GateState]>([
    ['policy missing', undefined, 10_000, 2000, { kind: 'closed' }],
    ['in place long ago', 0, 10_000, 2000, { kind: 'open' }],
    ['just restored', 9_500, 10_000, 2000, { kind: 'wait', ms: 1500 }],
    ['settled exactly now', 8_000, 10_000, 2000, { kind: 'open' }],
    ['no settling asked', 10_000, 10_000, 0, { kind: 'open' }],
  ])('%s', (_name, since, now, settle, want) => {
    expect(gateState(since, now, settle)).toEqual(want);
  });
});

describe('inPodCheckDue', () => {
  it.each<[string, number | undefined, number, boolean]>([
    ['policy missing', undefined, 100_000, true],
    ['restored 2 s ago (the gate just opened)', 98_000, 100_000, true],
    ['restored 59.999 s ago', 40_001, 100_000, true],
    ['restored exactly the window ago', 40_000, 100_000, false],
    ['in place for long: the steady state asks nothing of the pod', 0, 100_000, false],
  ])('%s', (_name, since, now, want) => {
    expect(inPodCheckDue(since, now, 60_000)).toBe(want);
  });
});

describe('lastWrittenMs', () => {
  const now = Date.parse('2026-11-23T12:00:10Z');
  it.each<[string, { creationTimestamp?: Date; managedFields?: Array<{ time?: Date }> }, number]>([
    ['no times: now', {}, now],
    ['created long ago', { creationTimestamp: new Date('2026-11-23T11:00:00Z') }, Date.parse('2026-11-23T11:00:01Z')],
    [
      'edited after creation: the edit counts',
      { creationTimestamp: new Date('2026-11-23T11:00:00Z'), managedFields: [{ time: new Date('2026-11-23T12:00:05Z') }, {}] },
      Date.parse('2026-11-23T12:00:06Z'),
    ],
    ['written this second: never later than now', { creationTimestamp: new Date('2026-11-23T12:00:10Z') }, now],
    ['server clock ahead: clamped to now', { creationTimestamp: new Date('2026-11-23T12:01:00Z') }, now],
  ])('%s', (_name, metadata, want) => {
    expect(lastWrittenMs({ metadata }, now)).toBe(want);
  });
});

describe('NetworkPolicy metrics', () => {
  it('counts restores by cause and shows whether the policy is in place', async () => {
    const m = createMetrics();
    m.networkPolicy.restored('deleted');
    m.networkPolicy.restored('deleted');
    m.networkPolicy.restored('modified');
    m.networkPolicy.inPlace(false);
    const text = await m.registry.metrics();
    expect(text).toContain('codemode_network_policy_restores_total{cause="deleted"} 2');
    expect(text).toContain('codemode_network_policy_restores_total{cause="modified"} 1');
    expect(text).toContain('codemode_network_policy_in_place 0');
  });
});
