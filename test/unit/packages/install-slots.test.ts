// The install slots of one gateway process: a cap for everyone, and at most half of it for one user.
import { describe, expect, it } from 'vitest';
import { InstallSlots, MAX_CONCURRENT_INSTALLS, MAX_INSTALLS_PER_USER } from '../../../src/packages/installer.js';
import { PackageError } from '../../../src/packages/policy.js';

const taken = (s: ReturnType<InstallSlots['take']>): { release(): void } => {
  if (s instanceof PackageError) throw s;
  return s;
};

describe('InstallSlots', () => {
  it.each<[string, string[], string, RegExp | undefined]>([
    ['a first install', [], 'alice', undefined],
    ["a user's second", ['alice'], 'alice', undefined],
    ["a user's third: refused, naming the user's share", ['alice', 'alice'], 'alice', /installs of yours are running already/],
    ['another user beside a full share', ['alice', 'alice'], 'bob', undefined],
    ['anyone once the server is full', ['alice', 'alice', 'bob', 'bob'], 'carol', /installs are running on this server already/],
    ['sessions without an owner share one key', ['', ''], '', /installs of yours/],
  ])('%s', (_what, before, user, refused) => {
    const slots = new InstallSlots();
    for (const u of before) taken(slots.take(u));
    const got = slots.take(user);
    if (refused) expect(got instanceof PackageError && got.message).toMatch(refused);
    else expect(got).not.toBeInstanceOf(PackageError);
  });

  it('gives a slot back once, however often released', () => {
    const slots = new InstallSlots();
    const first = taken(slots.take('alice'));
    taken(slots.take('alice'));
    first.release();
    first.release();
    taken(slots.take('alice'));
    expect(slots.take('alice')).toBeInstanceOf(PackageError);
    expect(MAX_INSTALLS_PER_USER * 2).toBe(MAX_CONCURRENT_INSTALLS);
  });
});
