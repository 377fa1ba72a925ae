// What counts as the kubelet's report that a sandbox pod's container started (src/sandbox/container-started.ts).
import { describe, expect, it } from 'vitest';
import { isStartedEventOf } from '../../../src/sandbox/container-started.js';

describe('isStartedEventOf', () => {
  it.each<[string, unknown, boolean]>([
    ['the Started Event of the pod', { reason: 'Started', regarding: { kind: 'Pod', name: 'sbr-a' } }, true],
    ['another pod of the same namespace', { reason: 'Started', regarding: { kind: 'Pod', name: 'sbr-b' } }, false],
    ['another reason (Pulled, Created)', { reason: 'Created', regarding: { kind: 'Pod', name: 'sbr-a' } }, false],
    ['an object of another kind with the name', { reason: 'Started', regarding: { kind: 'Job', name: 'sbr-a' } }, false],
    ['no regarding', { reason: 'Started' }, false],
    ['null', null, false],
    ['a string', 'Started', false],
  ])('%s: %s', (_what, event, expected) => {
    expect(isStartedEventOf(event, 'sbr-a')).toBe(expected);
  });
});
