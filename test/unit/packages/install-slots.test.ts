// The install slots of one gateway process: a cap for everyone, and at most half of it for one
// holder — a session's owner, or a session without one, which counts as its own user.
import { describe, expect, it } from 'vitest';
import { InstallSlots, MAX_CONCURRENT_INSTALLS, MAX_INSTALLS_PER_USER, installSlotKey } from '../../../src/packages/slots.js';
import { PackageError } from '../../../src/packages/policy.js';

const taken = (s: ReturnType<InstallSlots['take']>): { release(): void } => {
  if (s instanceof PackageError) throw s;
  return s;
};
/** The key of a session owned by `user`, and of the ownerless session `label` in `namespace`. */
const user = (name: string): string => installSlotKey({ user: name, namespace: 'ns', sessionLabel: 'owned' });
const ownerless = (label: string, namespace = 'ns'): string => installSlotKey({ namespace, sessionLabel: label });

describe('InstallSlots', () => {
  it.each<[string, string[], string, RegExp | undefined]>([
    ['a first install', [], user('alice'), undefined],
    ["a user's second", [user('alice')], user('alice'), undefined],
    ["a user's third: refused, naming the user's share", [user('alice'), user('alice')], user('alice'), /installs of yours are running already/],
    ['another user beside a full share', [user('alice'), user('alice')], user('bob'), undefined],
    ['anyone once the server is full', [user('alice'), user('alice'), user('bob'), user('bob')], user('carol'), /installs are running on this server already/],
    ['two ownerless sessions, two installs each, up to the server cap', [ownerless('s1'), ownerless('s1'), ownerless('s2')], ownerless('s2'), undefined],
    [
      'a third ownerless session once two hold the whole server',
      [ownerless('s1'), ownerless('s1'), ownerless('s2'), ownerless('s2')],
      ownerless('s3'),
      /installs are running on this server already/,
    ],
    [
      "an ownerless session's third: refused, naming the session",
      [ownerless('s1'), ownerless('s1')],
      ownerless('s1'),
      /installs in this session are running already/,
    ],
    ['the same session name in another namespace is another session', [ownerless('s1', 'a'), ownerless('s1', 'a')], ownerless('s1', 'b'), undefined],
    ["a user named like an ownerless session's key has a share of their own", [ownerless('s1'), ownerless('s1')], user('session:ns/s1'), undefined],
    ['an ownerless session beside the full share of a user named like its key', [user('session:ns/s1'), user('session:ns/s1')], ownerless('s1'), undefined],
  ])('%s', (_what, before, key, refused) => {
    const slots = new InstallSlots();
    for (const k of before) taken(slots.take(k));
    const got = slots.take(key);
    if (refused) expect(got instanceof PackageError && got.message).toMatch(refused);
    else expect(got).not.toBeInstanceOf(PackageError);
  });

  it('gives a slot back once, however often released', () => {
    const slots = new InstallSlots();
    const first = taken(slots.take(user('alice')));
    taken(slots.take(user('alice')));
    first.release();
    first.release();
    taken(slots.take(user('alice')));
    expect(slots.take(user('alice'))).toBeInstanceOf(PackageError);
    expect(MAX_INSTALLS_PER_USER * 2).toBe(MAX_CONCURRENT_INSTALLS);
  });
});
