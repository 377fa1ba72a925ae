// The per-user session limit the controller holds for every session (kubectl-made ones too):
// which of the owner's other sessions count, in a table.
import { describe, expect, it } from 'vitest';
import type { KubernetesObject } from '@kubernetes/client-node';
import { SessionReasons, type SandboxSession } from '../../../src/api/v1alpha1/index.js';
import { userSessionCapRefusal } from '../../../src/controller/session-cap.js';

const T0 = '2026-12-01T10:00:00Z';
const T1 = '2026-12-01T10:00:01Z';

interface S {
  name: string;
  user?: string;
  created?: string;
  phase?: string;
  reason?: string;
  deleting?: boolean;
}

function obj(s: S): SandboxSession {
  return {
    apiVersion: 'codemode.dev/v1alpha1',
    kind: 'SandboxSession',
    metadata: {
      name: s.name,
      uid: `uid-${s.name}`,
      creationTimestamp: s.created ?? T1,
      ...(s.deleting && { deletionTimestamp: T1 }),
    },
    spec: { language: 'python', idleTimeoutSeconds: 600, ...(s.user !== undefined && { owner: { user: s.user } }) },
    ...(s.phase !== undefined && { status: { phase: s.phase, ...(s.reason !== undefined && { reason: s.reason }) } }),
  } as SandboxSession;
}

const me: S = { name: 'm', user: 'alice' };

describe('userSessionCapRefusal', () => {
  it.each<[string, S, S[], number, boolean]>([
    ['no limit (0)', me, [{ name: 'a', user: 'alice', phase: 'Ready' }], 0, false],
    ['below the limit', me, [{ name: 'a', user: 'alice', phase: 'Ready' }], 2, false],
    ['at the limit with a started session', me, [{ name: 'a', user: 'alice', phase: 'Ready' }], 1, true],
    ['a started session created after this one still counts', me, [{ name: 'z', user: 'alice', phase: 'Pending', created: '2026-12-01T10:00:05Z' }], 1, true],
    ["another user's sessions do not count", me, [{ name: 'a', user: 'bob', phase: 'Ready' }], 1, false],
    ['sessions without an owner do not count', me, [{ name: 'a', phase: 'Ready' }], 1, false],
    ['a session without an owner is not limited', { name: 'm' }, [{ name: 'a', phase: 'Ready' }], 1, false],
    ['a session being deleted does not count', me, [{ name: 'a', user: 'alice', phase: 'Ready', deleting: true }], 1, false],
    ['one refused for this limit does not count', me, [{ name: 'a', user: 'alice', phase: 'Failed', reason: SessionReasons.UserSessionLimit }], 1, false],
    ['one failed for another reason counts (as in the gateway)', me, [{ name: 'a', user: 'alice', phase: 'Failed', reason: 'Unschedulable' }], 1, true],
    ['an older session not started yet counts', me, [{ name: 'a', user: 'alice', created: T0 }], 1, true],
    ['a newer session not started yet does not', me, [{ name: 'a', user: 'alice', created: '2026-12-01T10:00:05Z' }], 1, false],
    ['created in the same second: the name decides (a before m)', me, [{ name: 'a', user: 'alice' }], 1, true],
    ['created in the same second: the name decides (z after m)', me, [{ name: 'z', user: 'alice' }], 1, false],
    ['the session itself does not count', me, [{ ...me, phase: 'Pending' }], 1, false],
  ])('%s', (_name, session, others, cap, refused) => {
    const s = obj(session);
    const all = [s, ...others.map(obj)] as KubernetesObject[];
    const r = userSessionCapRefusal(s, all, cap);
    expect(r !== undefined).toBe(refused);
    if (r) expect(r).toMatch(/limit is \d+ per user \(CODEMODE_USER_MAX_SESSIONS\)/);
  });

  it('two sessions applied together: exactly one of them starts, whichever is judged first', () => {
    const a = obj({ name: 'a', user: 'alice' });
    const b = obj({ name: 'b', user: 'alice' });
    const all = [a, b] as KubernetesObject[];
    expect([userSessionCapRefusal(a, all, 1), userSessionCapRefusal(b, all, 1)].map((r) => r === undefined)).toEqual([true, false]);
  });
});
