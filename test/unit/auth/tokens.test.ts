import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { bearerToken } from '../../../src/auth/identity.js';
import { resourceMetadata, wwwAuthenticate } from '../../../src/auth/middleware.js';
import { identityFromClaims } from '../../../src/auth/oidc.js';
import { TOKENS_KEY, TokensAuthenticator, parseTokensCsv } from '../../../src/auth/tokens.js';

const T1 = 'tok-aaaaaaaaaaaaaaaaaaaa';
const T2 = 'tok-bbbbbbbbbbbbbbbbbbbb';

describe('parseTokensCsv (kube-apiserver static token format)', () => {
  it.each([
    ['one line, no groups', `${T1},alice,u1`, [{ user: 'alice', groups: [] }], 0],
    ['quoted groups', `${T1},alice,u1,"dev,ops"`, [{ user: 'alice', groups: ['dev', 'ops'] }], 0],
    [
      'comments and blank lines',
      `# team\n\n${T1},alice,u1,dev\n${T2},bob,u2`,
      [
        { user: 'alice', groups: ['dev'] },
        { user: 'bob', groups: [] },
      ],
      0,
    ],
    ['short token skipped', 'short,alice,u1', [], 1],
    ['no user skipped', `${T1},,u1`, [], 1],
    ['duplicate token skipped', `${T1},alice,u1\n${T1},mallory,u9`, [{ user: 'alice', groups: [] }], 1],
    ['token68 characters and = padding', 'tok-A.b_c~d+e/f-0123==,alice,u1', [{ user: 'alice', groups: [] }], 0],
    ['token with a space skipped', 'tok-aaaa bbbbbbbbbbbbbb,alice,u1', [], 1],
    ['token with a colon skipped', 'tok-aaaa:bbbbbbbbbbbbbb,alice,u1', [], 1],
    ['token with = inside skipped', 'tok-aaaa=bbbbbbbbbbbbbb,alice,u1', [], 1],
    ['token with a non-ASCII letter skipped', 'tok-aaaaébbbbbbbbbbbbbb,alice,u1', [], 1],
  ])('%s', (_n, text, identities, problems) => {
    const p = parseTokensCsv(text);
    expect(p.entries.map((e) => e.identity)).toEqual(identities);
    expect(p.problems).toHaveLength(problems);
    // Problems never repeat a token.
    for (const line of p.problems) expect(line).not.toContain('tok-');
  });
});

describe('a token a Bearer header cannot carry', () => {
  it('is skipped, saying why and what to use, without the token', () => {
    const p = parseTokensCsv(`${T1},alice,u1\ntok-with;semicolon-xxxxxx,bob,u2`);
    expect(p.entries.map((e) => e.identity.user)).toEqual(['alice']);
    expect(p.problems).toEqual(['line 2: the token contains characters a Bearer header cannot carry: use letters, digits and -._~+/ (and = only at the end)']);
  });

  it.each([T1, 'tok-A.b_c~d+e/f-0123==', 'tok-aaaa bbbbbbbbbbbbbb', 'tok-aaaa:bbbbbbbbbbbbbb', 'tok-aaaaébbbbbbbbbbbbbb'])(
    '%s loads exactly when bearerToken can read it from a header',
    (token) => {
      const loaded = parseTokensCsv(`${token},alice,u1`).entries.length === 1;
      expect(loaded).toBe(bearerToken(`Bearer ${token}`) === token);
    },
  );
});

describe('TokensAuthenticator', () => {
  const auth = new TokensAuthenticator(pino({ level: 'silent' }));
  const secret = (csv: string) => ({ metadata: { name: 'codemode-tokens' }, data: { [TOKENS_KEY]: Buffer.from(csv).toString('base64') } });

  it.each([
    ['a listed token', T1, { ok: true, identity: { user: 'alice', groups: ['dev'] } }],
    ['an unknown token', 'tok-cccccccccccccccccccc', { ok: false, failure: { error: 'invalid_token' } }],
    ['no token', undefined, { ok: false, failure: { error: 'invalid_request' } }],
  ])('%s', async (_n, token, expected) => {
    auth.load(secret(`${T1},alice,u1,dev`));
    expect(await auth.authenticate(token)).toMatchObject(expected);
  });

  it('follows the Secret: a removed token stops working, a missing Secret refuses everyone', async () => {
    auth.load(secret(`${T1},alice,u1\n${T2},bob,u2`));
    expect((await auth.authenticate(T2)).ok).toBe(true);
    auth.load(secret(`${T1},alice,u1`));
    expect((await auth.authenticate(T2)).ok).toBe(false);
    auth.load(undefined);
    expect((await auth.authenticate(T1)).ok).toBe(false);
  });
});

describe('bearerToken', () => {
  it.each([
    ['Bearer abc.def-ghi', 'abc.def-ghi'],
    ['bearer abc', 'abc'],
    ['Bearer   abc  ', 'abc'],
    ['Basic abc', undefined],
    ['Bearer', undefined],
    ['Bearer a b', undefined],
    [undefined, undefined],
  ])('%j → %j', (header, token) => {
    expect(bearerToken(header)).toBe(token);
  });
});

describe('401 answers and metadata', () => {
  it('points the client to the protected-resource metadata and never echoes quotes', () => {
    expect(
      wwwAuthenticate('https://mcp.example.com/.well-known/oauth-protected-resource/mcp', { error: 'invalid_token', description: 'The "aud" claim is wrong.' }),
    ).toBe(
      'Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", error="invalid_token", error_description="The aud claim is wrong."',
    );
  });
  it.each([
    ['with an issuer', 'https://issuer.example', { resource: 'https://g.example/mcp', authorization_servers: ['https://issuer.example'] }],
    ['static tokens', undefined, { resource: 'https://g.example/mcp' }],
  ])('%s', (_n, issuer, expected) => {
    const m = resourceMetadata('https://g.example', issuer);
    expect(m).toMatchObject({ ...expected, bearer_methods_supported: ['header'] });
    if (!issuer) expect(m).not.toHaveProperty('authorization_servers');
  });
});

describe('identityFromClaims', () => {
  it.each([
    ['sub and groups', { sub: 'alice', groups: ['dev', 7, 'ops'] }, 'sub', { ok: true, identity: { user: 'alice', groups: ['dev', 'ops'] } }],
    ['email claim, one group as a string', { email: 'a@x', groups: 'dev' }, 'email', { ok: true, identity: { user: 'a@x', groups: ['dev'] } }],
    ['missing user claim', { groups: ['dev'] }, 'sub', { ok: false }],
    ['empty user claim', { sub: '' }, 'sub', { ok: false }],
    // An address the issuer did not verify names nobody: its owner may be another user.
    ['email claim, email_verified true', { email: 'a@x', email_verified: true }, 'email', { ok: true, identity: { user: 'a@x' } }],
    ['email claim, email_verified false', { email: 'a@x', email_verified: false }, 'email', { ok: false, failure: { error: 'invalid_token' } }],
    ['email claim, email_verified "false"', { email: 'a@x', email_verified: 'false' }, 'email', { ok: false, failure: { error: 'invalid_token' } }],
    ['email claim, email_verified null', { email: 'a@x', email_verified: null }, 'email', { ok: false, failure: { error: 'invalid_token' } }],
    ['another claim, email_verified false', { sub: 'alice', email_verified: false }, 'sub', { ok: true, identity: { user: 'alice' } }],
  ])('%s', (_n, payload, claim, expected) => {
    expect(identityFromClaims(payload, claim, 'groups')).toMatchObject(expected);
  });
});
