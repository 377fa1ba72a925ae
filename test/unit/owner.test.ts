import { describe, expect, it } from 'vitest';
import { ownerLabelValue } from '../../src/api/v1alpha1/index.js';

const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

describe('ownerLabelValue', () => {
  it.each([
    ['alice', 'alice'],
    ['alice@example.com', /^alice_example.com-[0-9a-f]{10}$/],
    ['system:serviceaccount:team:agent', /^system_serviceaccount_team_agent-[0-9a-f]{10}$/],
    ['-x-', /^x-[0-9a-f]{10}$/],
    ['@@@', /^[0-9a-f]{10}$/],
    ['a'.repeat(80), /^a{52}-[0-9a-f]{10}$/],
  ])('%s', (user, expected) => {
    const v = ownerLabelValue(user);
    if (typeof expected === 'string') expect(v).toBe(expected);
    else expect(v).toMatch(expected);
    expect(v.length).toBeLessThanOrEqual(63);
    expect(v).toMatch(LABEL_VALUE);
  });

  it('keeps users apart whose names clean up the same', () => {
    expect(ownerLabelValue('a:b')).not.toBe(ownerLabelValue('a;b'));
  });
});
