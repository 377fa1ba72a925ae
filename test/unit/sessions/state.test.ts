import { describe, expect, it } from 'vitest';
import { sessionState, startingUntil } from '../../../src/sessions/state.js';

describe('startingUntil: how long a call waits for a session still starting', () => {
  it.each([
    ['no packages: the start-up allowance it was given', undefined, 300, 1_000],
    ['an empty package list', [], 300, 1_000],
    ['packages: also the packages allowance (they install before Ready)', ['tabulate'], 300, 301_000],
    ['packages, no packages allowance configured', ['tabulate'], 0, 1_000],
  ])('%s', (_what, packages: string[] | undefined, packagesTimeoutSeconds, expected) => {
    expect(startingUntil(1_000, { spec: { language: 'python', ...(packages && { packages }) } } as never, packagesTimeoutSeconds)).toBe(expected);
  });
});

describe('sessionState: where a session is for a call', () => {
  const kernelLost = { message: 'OOMKilled', time: '2026-12-02T00:00:00Z' };
  it.each([
    ['no status yet', undefined, 'starting'],
    ['Pending', { phase: 'Pending' }, 'starting'],
    ['Ready without a pod name (cannot be reached yet)', { phase: 'Ready' }, 'starting'],
    ['Ready with its pod', { phase: 'Ready', podName: 'p' }, 'ready'],
    ['Ready, but the gateway reported its interpreter lost', { phase: 'Ready', podName: 'p', kernelLost }, 'gone'],
    ['Pending, interpreter lost', { phase: 'Pending', kernelLost }, 'gone'],
    ['Lost', { phase: 'Lost', podName: 'p' }, 'gone'],
    ['Failed', { phase: 'Failed' }, 'gone'],
  ])('%s → %s', (_what, status, expected) => {
    expect(sessionState({ metadata: { name: 's' }, spec: { language: 'python' }, ...(status && { status }) } as never)).toBe(expected);
  });
});
