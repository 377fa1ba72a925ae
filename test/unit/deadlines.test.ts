import { describe, expect, it } from 'vitest';
import { POD_DEADLINE_MARGIN_SECONDS, runPodSeconds, sessionPodSeconds } from '../../src/sandbox/deadlines.js';
import { claimTerms } from '../../src/runs/warm-claims.js';
import { lostAfterMs } from '../../src/controller/run-decision.js';

describe('sandbox pod deadlines', () => {
  it.each([
    [120, 30, 210],
    [120, 300, 480],
    [0, 1, 61],
  ])('a run pod with %i s to start and a %i s timeout lives at most %i s', (startup, timeout, expected) => {
    expect(runPodSeconds(startup, timeout)).toBe(expected);
  });

  it.each([
    [3600, 3660],
    [86400, 86460],
  ])('a session pod with a %i s lifetime lives at most %i s', (lifetime, expected) => {
    expect(sessionPodSeconds(lifetime)).toBe(expected);
  });

  // The rules that must agree: a claimed pool pod is deleted no sooner than a run may count as lost.
  it.each([
    [120, 30],
    [60, 300],
  ])('a run (start-up %i s, timeout %i s) is declared lost exactly when its claimed pod may be deleted', (startup, timeout) => {
    const created = new Date('2026-12-02T00:00:00Z');
    const run = {
      metadata: { name: 'r', uid: 'u', creationTimestamp: created.toISOString() },
      spec: { language: 'python', code: '', timeoutSeconds: timeout },
    };
    const claim = claimTerms(run as never, { podStartupTimeoutSeconds: startup });
    expect(lostAfterMs(run, startup, created)).toBe(claim.deadline * 1000);
    expect(claim.deadline - startup - timeout).toBe(POD_DEADLINE_MARGIN_SECONDS);
  });
});
