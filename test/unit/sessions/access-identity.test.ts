// Ownership is compared on the exact stored spec.owner.user. An ownerless session is the
// unauthenticated caller's (CODEMODE_AUTH_MODE=none: anonymous, group system:unauthenticated), not
// that of an authenticated user who happens to be named "anonymous".
import { describe, expect, it } from 'vitest';
import type { Owner } from '../../../src/api/v1alpha1/index.js';
import { ANONYMOUS } from '../../../src/auth/identity.js';
import { LENT_TOOLS_REFUSED, canSee, isOwner, toolCallsFor } from '../../../src/sessions/access.js';

const session = (user?: string) => ({ spec: { language: 'python' as const, idleTimeoutSeconds: 600, ...(user !== undefined && { owner: { user } }) } });
const unauthenticated: Owner = { user: ANONYMOUS.user, groups: [...ANONYMOUS.groups] };

describe('canSee and isOwner compare the exact stored owner', () => {
  it.each<[string, ReturnType<typeof session>, Owner, boolean]>([
    ['the unauthenticated caller, an ownerless session', session(), unauthenticated, true],
    ['a token user named anonymous, an ownerless session', session(), { user: 'anonymous', groups: ['dev'] }, false],
    ['a token user named anonymous without groups, an ownerless session', session(), { user: 'anonymous' }, false],
    ['the unauthenticated caller, an owned session', session('alice'), unauthenticated, false],
    ['case differs', session('alice'), { user: 'Alice' }, false],
    ['trailing space', session('alice'), { user: 'alice ' }, false],
    ['NFC vs NFD', session('jos\u00e9'), { user: 'jose\u0301' }, false],
    ['a prefix', session('alice'), { user: 'ali' }, false],
    ['a user named like a separator join', session('a:b'), { user: 'a' }, false],
    ['the exact name', session('system:serviceaccount:team:agent'), { user: 'system:serviceaccount:team:agent' }, true],
  ])('%s', (_n, s, caller, expected) => {
    expect(isOwner(s, caller)).toBe(expected);
    expect(canSee(s, caller, ['platform'])).toBe(expected);
  });
});

describe("toolCallsFor: a call in another user's session lends it no tool access", () => {
  const admin: Owner = { user: 'root', groups: ['platform'] };
  const frame = { id: 'r1', type: 'call', callId: 'c1', op: 'call', server: 'github', tool: 'merge', args: {} } as const;
  it.each<[string, ReturnType<typeof session>, Owner | undefined, boolean]>([
    ["the owner's call", session('alice'), { user: 'alice' }, true],
    ["an administrator's call in alice's session", session('alice'), admin, false],
    ["an administrator's call in an ownerless session", session(), admin, false],
    ['the unauthenticated caller in an ownerless session', session(), unauthenticated, true],
    ['an internal caller', session('alice'), undefined, true],
  ])('%s: tool calls made: %s', async (_n, s, caller, made) => {
    const answer = { ok: true as const, value: 'merged' };
    const handler = toolCallsFor(s, caller, async () => answer);
    expect(canSee(s, caller, ['platform'])).toBe(true);
    expect(await handler(frame)).toEqual(made ? answer : { ok: false, error: { kind: 'denied', message: LENT_TOOLS_REFUSED } });
  });
});
