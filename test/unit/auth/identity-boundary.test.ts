// What an authenticated identity may be: it becomes spec.owner of everything its calls create, and
// ownership is compared on the stored value, so it must be stored exactly as authenticated. An
// identity the API server would store differently (an unpaired surrogate becomes U+FFFD), or not at
// all (too long, too many groups), is refused at the door with a reason; every other name is kept
// byte for byte. Over HTTP with a local OIDC issuer and real MCP clients, like oidc.test.ts.
import { SignJWT, type CryptoKey } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { identityProblem } from '../../../src/auth/identity.js';
import { OidcAuthenticator, identityFromClaims } from '../../../src/auth/oidc.js';
import { connectClient, startGateway, type Gateway } from '../gateway/harness.js';
import { startIssuer, type LocalIssuer } from './issuer.js';

const AUDIENCE = 'https://gateway.example/mcp';
let localIssuer: LocalIssuer;
let issuer = '';
let key: CryptoKey;
let gateway: Gateway;

beforeAll(async () => {
  localIssuer = await startIssuer();
  ({ url: issuer, key } = localIssuer);
  gateway = await startGateway(
    {},
    { authenticator: new OidcAuthenticator({ issuer, audience: AUDIENCE, usernameClaim: 'sub', groupsClaim: 'groups' }), issuer },
  );
  gateway.setReady(true);
});
afterAll(async () => {
  await gateway?.close();
  await localIssuer?.close();
});

const token = (sub: string, groups: unknown): Promise<string> =>
  new SignJWT({ groups })
    .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
    .setIssuer(issuer)
    .setAudience(AUDIENCE)
    .setSubject(sub)
    .setIssuedAt()
    .setExpirationTime('5m')
    .sign(key);

const many = (n: number): string[] => Array.from({ length: n }, (_, i) => `g${i}`);

describe('identities that cannot be recorded exactly are refused with a reason (403)', () => {
  it.each([
    ['an unpaired surrogate (stored as U+FFFD, like every other one)', 'x\uD800', [], /unpaired UTF-16 surrogates/],
    ['a control character', 'alice\u001b[2J', [], /control characters/],
    ['a newline', 'alice\nbob', [], /control characters/],
    ['a user name over 256 characters', 'a'.repeat(257), [], /257 characters long; at most 256/],
    ['257 astral characters (514 UTF-16 units)', '\u{1F600}'.repeat(257), [], /257 characters long; at most 256/],
    ['65 groups', 'alice', many(65), /65 groups; at most 64/],
    ['a group over 256 characters', 'alice', ['g'.repeat(257)], /group name .* 257 characters long/],
    ['a user name Kubernetes reserves', 'system:admin', [], /user name starts with system:, which Kubernetes reserves/],
    ['the unauthenticated caller, forged by an issuer', 'anonymous', ['system:unauthenticated'], /group name \("system:unauthenticated"\) starts with system:/],
    ['a service account, named by an issuer', 'system:serviceaccount:team:agent', ['dev'], /only from the cluster \(CODEMODE_AUTH_MODE=kubernetes\)/],
  ])('%s', async (_n, sub, groups, reason) => {
    const res = await fetch(gateway.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${await token(sub, groups)}` },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
    });
    expect(res.status).toBe(403);
    const body = (await res.json()) as { error: { message: string } };
    expect(body.error.message).toMatch(/^Forbidden: /);
    expect(body.error.message).toMatch(reason);
    expect(body.error.message).toMatch(/Ask the administrator/);
  });
});

describe('every other identity is recorded as authenticated, byte for byte', () => {
  it.each([
    ['a plain name', 'alice', ['dev'], { user: 'alice', groups: ['dev'] }],
    ['case kept', 'Alice', [], { user: 'Alice' }],
    ['NFD kept (not normalised)', 'jose\u0301', [], { user: 'jose\u0301' }],
    ['separators and selector characters', 'a/b:c=d,e*f', [], { user: 'a/b:c=d,e*f' }],
    ['surrounding spaces', ' alice ', [], { user: ' alice ' }],
    ['an astral character', 'alice\u{1F600}', [], { user: 'alice\u{1F600}' }],
    ['256 characters', 'a'.repeat(256), many(64), { user: 'a'.repeat(256), groups: many(64) }],
    // The API server counts characters (maxLength), so the gateway does: 512 UTF-16 units fit.
    ['256 astral characters', '\u{1F600}'.repeat(256), ['\u{1F600}'.repeat(256)], { user: '\u{1F600}'.repeat(256), groups: ['\u{1F600}'.repeat(256)] }],
    ['an empty group is no group', 'alice', ['', 'dev'], { user: 'alice', groups: ['dev'] }],
  ])('%s', async (_n, sub, groups, owner) => {
    const client = await connectClient('v2 (2026-07-28)', gateway.url, { authorization: `Bearer ${await token(sub, groups)}` });
    try {
      const r = await client.callTool({ code: 'print(1)' });
      expect(r.isError ?? false).toBe(false);
    } finally {
      await client.close();
    }
    expect(gateway.service.calls.at(-1)?.request.owner).toEqual(owner);
  });
});

describe('identityProblem', () => {
  it.each([
    [{ user: 'system:serviceaccount:team:agent', groups: ['system:serviceaccounts', 'system:authenticated'] }, undefined],
    [{ user: '', groups: [] }, /user name is empty/],
    [{ user: 'alice', groups: [''] }, /group name \(""\) is empty/],
    [{ user: '\uDC00x', groups: [] }, /unpaired/],
    [{ user: 'x\u0085', groups: [] }, /control characters/],
  ])('%j', (identity, problem) => {
    const p = identityProblem(identity);
    if (problem === undefined) expect(p).toBeUndefined();
    else expect(p).toMatch(problem);
  });

  it.each([
    ['cluster', { user: 'system:serviceaccount:team:agent', groups: ['system:serviceaccounts'] }, undefined],
    ['gateway', { user: 'system:serviceaccount:team:agent', groups: [] }, /user name starts with system:/],
    ['gateway', { user: 'alice', groups: ['dev', 'system:masters'] }, /group name \("system:masters"\) starts with system:/],
    ['gateway', { user: 'gw:system:x', groups: ['gw:system:masters'] }, undefined],
    ['gateway', { user: 'System:admin', groups: [] }, undefined],
  ] as const)('names Kubernetes reserves, from the %s: %j', (from, identity, problem) => {
    const p = identityProblem(identity, from);
    if (problem === undefined) expect(p).toBeUndefined();
    else expect(p).toMatch(problem);
  });

  it('an OIDC groups claim: strings only, empty ones dropped', () => {
    expect(identityFromClaims({ sub: 'alice', groups: ['dev', '', 7, 'ops'] }, 'sub', 'groups')).toEqual({
      ok: true,
      identity: { user: 'alice', groups: ['dev', 'ops'] },
    });
  });
});
