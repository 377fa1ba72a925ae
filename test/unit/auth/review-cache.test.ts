// The TokenReview answers' cache (src/auth/review-cache.ts), around a check whose answers and
// timing each test controls: what is kept, for how long, what is shared, and what a flood of
// made-up tokens can and cannot do to the answers of the users who are calling.
import { describe, expect, it } from 'vitest';
import type { AuthResult } from '../../../src/auth/identity.js';
import { ReviewCache, ReviewsBusyError } from '../../../src/auth/review-cache.js';

const ACCEPT = (user: string): AuthResult => ({ ok: true, identity: { user, groups: [] } });
const REFUSE: AuthResult = { ok: false, failure: { error: 'invalid_token', description: 'The cluster did not accept the token.' } };

/** A check that accepts tokens starting with "ok-" (as their user) and counts its calls; with `hold`, its answers wait for release(). */
function checker(hold = false) {
  const calls: string[] = [];
  let release = (): void => undefined;
  const gate = new Promise<void>((r) => (release = r));
  const check = async (token: string): Promise<AuthResult> => {
    calls.push(token);
    if (hold) await gate;
    if (token.startsWith('fail-')) throw new Error('the API server did not answer');
    return token.startsWith('ok-') ? ACCEPT(token.slice(3)) : REFUSE;
  };
  return { calls, check, release: () => release() };
}

describe('ReviewCache', () => {
  it('shares one check among concurrent requests with one token', async () => {
    const c = checker(true);
    const cache = new ReviewCache(c.check);
    const answers = Array.from({ length: 20 }, () => cache.get('ok-alice'));
    c.release();
    expect(await Promise.all(answers)).toEqual(Array.from({ length: 20 }, () => ACCEPT('alice')));
    expect(c.calls).toEqual(['ok-alice']);
  });

  it.each([
    ['an accepted token, within the answer time', 'ok-alice', 9_999, 1],
    ['an accepted token, once the answer time is over', 'ok-alice', 10_000, 2],
    ['a refused token, within the answer time', 'nope', 9_999, 1],
    ['a refused token, once the answer time is over', 'nope', 10_000, 2],
  ])('keeps an answer for its time: %s', async (_n, token, later, checks) => {
    const c = checker();
    let t = 0;
    const cache = new ReviewCache(c.check, { ttlMs: 10_000, max: 10, maxInFlight: 4, maxWaiting: 0 }, () => t);
    const first = await cache.get(token);
    t = later;
    expect(await cache.get(token)).toEqual(first);
    expect(c.calls).toHaveLength(checks);
  });

  it("a flood of made-up tokens evicts only refusals, never the callers' accepted answers", async () => {
    const c = checker();
    const cache = new ReviewCache(c.check, { ttlMs: 10_000, max: 3, maxInFlight: 4, maxWaiting: 0 }, () => 0);
    await cache.get('ok-alice');
    await cache.get('ok-bob');
    for (let i = 0; i < 50; i++) expect(await cache.get(`random-${i}`)).toEqual(REFUSE);
    expect(cache.sizes).toEqual({ accepted: 2, refused: 3, running: 0, waiting: 0 });
    expect(await cache.get('ok-alice')).toEqual(ACCEPT('alice'));
    expect(await cache.get('ok-bob')).toEqual(ACCEPT('bob'));
    expect(c.calls.filter((t) => t.startsWith('ok-'))).toEqual(['ok-alice', 'ok-bob']);
  });

  it('keeps at most `max` accepted answers, the oldest going first', async () => {
    const c = checker();
    const cache = new ReviewCache(c.check, { ttlMs: 10_000, max: 3, maxInFlight: 4, maxWaiting: 0 }, () => 0);
    for (const u of ['a', 'b', 'c', 'd']) await cache.get(`ok-${u}`);
    expect(cache.sizes.accepted).toBe(3);
    await cache.get('ok-d');
    await cache.get('ok-a');
    expect(c.calls).toEqual(['ok-a', 'ok-b', 'ok-c', 'ok-d', 'ok-a']);
  });

  it('refuses a new token as busy while `maxInFlight` checks run, joins one that is running, and checks again once they end', async () => {
    const c = checker(true);
    const cache = new ReviewCache(c.check, { ttlMs: 10_000, max: 10, maxInFlight: 2, maxWaiting: 0 });
    const a = cache.get('ok-a');
    const b = cache.get('x-b');
    await expect(cache.get('ok-c')).rejects.toBeInstanceOf(ReviewsBusyError);
    await expect(cache.get('ok-c')).rejects.toThrow(/too many new tokens .* retry shortly/);
    const joined = cache.get('ok-a');
    expect(cache.sizes).toMatchObject({ running: 2, waiting: 0 });
    c.release();
    expect(await Promise.all([a, b, joined])).toEqual([ACCEPT('a'), REFUSE, ACCEPT('a')]);
    expect(await cache.get('ok-c')).toEqual(ACCEPT('c'));
    expect(c.calls).toEqual(['ok-a', 'x-b', 'ok-c']);
  });

  it('lets `maxWaiting` new tokens wait for a place, in order, and refuses the next as busy', async () => {
    const c = checker(true);
    const cache = new ReviewCache(c.check, { ttlMs: 10_000, max: 10, maxInFlight: 1, maxWaiting: 2 });
    const answers = [cache.get('ok-a'), cache.get('ok-b'), cache.get('ok-c')];
    await expect(cache.get('ok-d')).rejects.toBeInstanceOf(ReviewsBusyError);
    expect(cache.sizes).toMatchObject({ running: 1, waiting: 2 });
    await new Promise((r) => setImmediate(r));
    expect(c.calls).toEqual(['ok-a']);
    // A waiting token is joined like a running one, without taking a place.
    answers.push(cache.get('ok-c'));
    c.release();
    expect(await Promise.all(answers)).toEqual([ACCEPT('a'), ACCEPT('b'), ACCEPT('c'), ACCEPT('c')]);
    expect(c.calls).toEqual(['ok-a', 'ok-b', 'ok-c']);
    expect(cache.sizes).toMatchObject({ running: 0, waiting: 0 });
  });

  it('keeps no failed check: the next request asks again, and the failure frees its place', async () => {
    const c = checker();
    const cache = new ReviewCache(c.check, { ttlMs: 10_000, max: 10, maxInFlight: 1, maxWaiting: 0 });
    await expect(cache.get('fail-1')).rejects.toThrow(/did not answer/);
    await expect(cache.get('fail-1')).rejects.toThrow(/did not answer/);
    expect(await cache.get('ok-a')).toEqual(ACCEPT('a'));
    expect(c.calls).toEqual(['fail-1', 'fail-1', 'ok-a']);
    expect(cache.sizes).toEqual({ accepted: 1, refused: 0, running: 0, waiting: 0 });
  });

  // A flood of made-up tokens keeps every place taken and the line full; an accepted answer whose
  // time is over must not then be refused as busy like a made-up token (its user's every call would
  // get 503 for as long as the flood lasts): its renewal goes first in line, past the cap.
  function flood(revoked: () => boolean) {
    let release = (): void => undefined;
    const gate = new Promise<void>((r) => (release = r));
    const calls: string[] = [];
    const check = async (token: string): Promise<AuthResult> => {
      calls.push(token);
      if (!token.startsWith('made-up')) return revoked() ? REFUSE : ACCEPT('alice');
      await gate;
      return REFUSE;
    };
    return { calls, check, release: () => release(), tokens: (from: number) => [from, from + 1, from + 2].map((i) => `made-up-${i}`) };
  }

  it.each([
    ['still valid: renewed ahead of the made-up tokens', false, ACCEPT('alice')],
    ['revoked meanwhile: its renewal refuses it', true, REFUSE],
  ])('an accepted token whose answer time is over, during a flood: %s', async (_n, revokedNow, answer) => {
    let t = 0;
    let revoked = false;
    const f = flood(() => revoked);
    const cache = new ReviewCache(f.check, { ttlMs: 10_000, max: 10, maxInFlight: 1, maxWaiting: 2 }, () => t);
    expect(await cache.get('ok-alice')).toEqual(ACCEPT('alice'));
    t = 10_000;
    revoked = revokedNow;
    const made = f.tokens(1).map((tok) => cache.get(tok));
    await expect(cache.get('made-up-9')).rejects.toBeInstanceOf(ReviewsBusyError);
    const renewal = cache.get('ok-alice');
    f.release();
    expect(await renewal).toEqual(answer);
    await Promise.all(made);
    expect(f.calls).toEqual(['ok-alice', 'made-up-1', 'ok-alice', 'made-up-2', 'made-up-3']);
  });

  it('a token refused at its renewal is no renewal any more: it waits in line like a made-up one', async () => {
    let t = 0;
    let revoked = false;
    const f = flood(() => revoked);
    const cache = new ReviewCache(f.check, { ttlMs: 10_000, max: 10, maxInFlight: 1, maxWaiting: 2 }, () => t);
    await cache.get('ok-alice');
    t = 10_000;
    revoked = true;
    expect(await cache.get('ok-alice')).toEqual(REFUSE);
    t = 20_000;
    const made = f.tokens(1).map((tok) => cache.get(tok));
    await expect(cache.get('ok-alice')).rejects.toBeInstanceOf(ReviewsBusyError);
    f.release();
    await Promise.all(made);
  });
});
