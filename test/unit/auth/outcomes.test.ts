// What the middleware reports of each request's authentication (codemode_auth_requests_total), with
// the HTTP status the caller gets: the real authenticators of each mode where the outcome is theirs
// (tokens from a Secret's content, an OIDC issuer that cannot be reached), and for `busy` the
// review cache's refusal as KubernetesAuthenticator passes it on.
import { Hono } from 'hono';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { AuthOutcome, Authenticator } from '../../../src/auth/identity.js';
import { authMiddleware, carryIdentity, identityOf } from '../../../src/auth/middleware.js';
import { OidcAuthenticator } from '../../../src/auth/oidc.js';
import { ReviewsBusyError } from '../../../src/auth/review-cache.js';
import { TokensAuthenticator } from '../../../src/auth/tokens.js';

const GOOD = 'good-token-0123456789';
const WIDE = 'wide-token-0123456789';

function tokens(): Authenticator {
  const t = new TokensAuthenticator(pino({ level: 'silent' }));
  const groups = Array.from({ length: 65 }, (_, i) => `g${i}`).join(',');
  t.load({ data: { 'tokens.csv': Buffer.from(`${GOOD},alice,u1,"dev"\n${WIDE},bob,u2,"${groups}"\n`).toString('base64') } });
  return t;
}

const unreachableIssuer = (): Authenticator =>
  new OidcAuthenticator({ issuer: 'http://127.0.0.1:1', audience: 'a', usernameClaim: 'sub', groupsClaim: 'groups' });
const busy: Authenticator = { mode: 'kubernetes', authenticate: () => Promise.reject(new ReviewsBusyError()) };
const none: Authenticator = { mode: 'none', authenticate: () => Promise.reject(new Error('mode none never authenticates')) };

describe('authMiddleware reports each outcome', () => {
  it.each<[string, () => Authenticator, string | undefined, AuthOutcome, number]>([
    ['a listed token', tokens, `Bearer ${GOOD}`, 'accepted', 200],
    ['no Authorization header', tokens, undefined, 'no_token', 401],
    ['another scheme', tokens, `Basic ${GOOD}`, 'no_token', 401],
    ['an unknown token', tokens, 'Bearer unknown-token', 'invalid_token', 401],
    ['an identity with 65 groups', tokens, `Bearer ${WIDE}`, 'forbidden', 403],
    ['an issuer that cannot be reached', unreachableIssuer, 'Bearer a.b.c', 'unavailable', 503],
    ['too many new tokens being reviewed', () => busy, 'Bearer x', 'busy', 503],
    ['mode none', () => none, undefined, 'accepted', 200],
  ])('%s → %s', async (_n, authenticator, header, outcome, status) => {
    const seen: AuthOutcome[] = [];
    const app = new Hono();
    app.use('/mcp', authMiddleware({ authenticator: authenticator(), onResult: (o) => seen.push(o) }));
    app.post('/mcp', (c) => c.text('ok'));
    const res = await app.request('/mcp', { method: 'POST', headers: header === undefined ? {} : { authorization: header } });
    expect(res.status).toBe(status);
    expect(seen).toEqual([outcome]);
  });
});

describe('a request rebuilt from an authenticated one', () => {
  it.each([
    ['carried', true, 'alice'],
    ['not carried: an internal caller would be assumed', false, undefined],
  ])('has the caller when its identity is %s', async (_n, carry, user) => {
    const app = new Hono();
    app.use('/mcp', authMiddleware({ authenticator: tokens() }));
    app.post('/mcp', (c) => {
      // As the batch check rebuilds a request whose body it read (batch-limit.ts replay).
      const rebuilt = new Request(c.req.raw, { body: 'replayed', method: 'POST' });
      if (carry) carryIdentity(c.req.raw, rebuilt);
      return c.text(identityOf(rebuilt)?.user ?? 'none');
    });
    const res = await app.request('/mcp', { method: 'POST', headers: { authorization: `Bearer ${GOOD}` }, body: '{}' });
    expect(await res.text()).toBe(user ?? 'none');
  });
});
