import { describe, expect, it } from 'vitest';
import { canSee } from '../../../src/sessions/access.js';

const session = (user?: string) => ({ spec: { language: 'python' as const, idleTimeoutSeconds: 600, ...(user && { owner: { user } }) } });

describe('canSee (a user sees only their own sessions; admins see all)', () => {
  it.each([
    ['the owner', session('alice'), { user: 'alice' }, true],
    ['another user', session('alice'), { user: 'bob' }, false],
    ['another user in an admin group', session('alice'), { user: 'root', groups: ['platform'] }, true],
    ['another user in a non-admin group', session('alice'), { user: 'bob', groups: ['dev'] }, false],
    ['an internal caller', session('alice'), undefined, true],
    ['the unauthenticated caller (auth mode none), an unowned session', session(), { user: 'anonymous', groups: ['system:unauthenticated'] }, true],
    ['a user, an unowned session', session(), { user: 'bob' }, false],
  ])('%s', (_n, s, caller, expected) => {
    expect(canSee(s, caller, ['platform'])).toBe(expected);
  });
});
