// The issuer's signing keys (JWKS) that cannot be fetched: the token is not at fault, so the answer
// is 503 with Retry-After (the client retries), never 401 (the client would throw its token away
// and send its user through a new login while the issuer is down). jose throws plain JOSEErrors
// for a JWKS that answers non-200 or non-JSON, also when it refetches its 10-minute-old copy.
// And while the issuer is down, requests are answered without each making a request to it.
// A local issuer over HTTP, tokens signed with jose.
import { SignJWT, errors, generateKeyPair, type CryptoKey } from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { OidcAuthenticator, isTokenFault, jwksProblem } from '../../../src/auth/oidc.js';
import { startGateway, MCP_POST_HEADERS, INITIALIZE_BODY, sleep } from '../gateway/harness.js';
import { startIssuer, type LocalIssuer } from './issuer.js';

const AUDIENCE = 'https://gateway.example/mcp';
let issuer: LocalIssuer;
let otherKey: CryptoKey;

beforeAll(async () => {
  ({ privateKey: otherKey } = await generateKeyPair('RS256'));
});
afterEach(async () => {
  vi.useRealTimers();
  await issuer?.close();
});

async function token(o: { key?: CryptoKey; kid?: string } = {}): Promise<string> {
  return new SignJWT({})
    .setProtectedHeader({ alg: 'RS256', kid: o.kid ?? 'k1' })
    .setIssuer(issuer.url)
    .setAudience(AUDIENCE)
    .setSubject('alice')
    .setIssuedAt()
    .setExpirationTime('5m')
    .sign(o.key ?? issuer.key);
}

const authenticator = (retryMs = 60_000): OidcAuthenticator =>
  new OidcAuthenticator({ issuer: issuer.url, audience: AUDIENCE, usernameClaim: 'sub', groupsClaim: 'groups', retryMs });
const jwksFetches = (): number => issuer.requests.filter((r) => r === '/jwks').length;

describe('isTokenFault', () => {
  it.each([
    ['JWTExpired', new errors.JWTExpired('expired', {}), true],
    ['JWTClaimValidationFailed', new errors.JWTClaimValidationFailed('aud', {}), true],
    ['JWTInvalid', new errors.JWTInvalid(), true],
    ['JWSInvalid', new errors.JWSInvalid(), true],
    ['JWSSignatureVerificationFailed', new errors.JWSSignatureVerificationFailed(), true],
    ['JWKSNoMatchingKey', new errors.JWKSNoMatchingKey(), true],
    ['JWKSMultipleMatchingKeys', new errors.JWKSMultipleMatchingKeys(), true],
    ['JOSEAlgNotAllowed', new errors.JOSEAlgNotAllowed(), true],
    ['JOSENotSupported', new errors.JOSENotSupported(), true],
    ['JOSEError (JWKS answered non-200 or non-JSON)', new errors.JOSEError('Expected 200 OK'), false],
    ['JWKSInvalid', new errors.JWKSInvalid(), false],
    ['JWKInvalid', new errors.JWKInvalid(), false],
    ['JWKSTimeout', new errors.JWKSTimeout(), false],
    ['TypeError (fetch failed)', new TypeError('fetch failed'), false],
    ['a string', 'ERR_JWT_EXPIRED', false],
  ])('%s: %s', (_name, err, fault) => {
    expect(isTokenFault(err)).toBe(fault);
  });
});

describe('jwksProblem', () => {
  it.each<[number, string, RegExp | undefined]>([
    [200, '{"keys":[{"kty":"RSA"}]}', undefined],
    [200, '{"keys":[]}', undefined],
    [500, '{"keys":[]}', /^it answered HTTP 500$/],
    [429, '', /^it answered HTTP 429$/],
    [301, '', /HTTP 301, a redirect .*CODEMODE_OIDC_JWKS_URL/],
    [200, '<html>', /not JSON/],
    [200, '{"error":"maintenance"}', /not a key set/],
    [200, '{"keys":[1]}', /not a key set/],
    [200, '{"keys":[[]]}', /not a key set/],
    [200, 'null', /not a key set/],
  ])('HTTP %i with %s', (status, text, problem) => {
    const got = jwksProblem(status, text);
    if (problem === undefined) expect(got).toBeUndefined();
    else expect(got).toMatch(problem);
  });
});

describe('a JWKS that cannot be fetched', () => {
  it.each<[string, LocalIssuer['jwks']]>([
    ['answers 500', 500],
    ['answers 503', 503],
    ['answers 429', 429],
    ['redirects', 302],
    ['answers HTML', 'not-json'],
    ['answers JSON that is not a key set', 'not-a-set'],
  ])('that %s: the token is not refused, authentication is unavailable', async (_name, how) => {
    issuer = await startIssuer();
    issuer.jwks = how;
    await expect(authenticator().authenticate(await token())).rejects.toThrow(/signing keys \(JWKS\) at .* could not be fetched.*retry/i);
  });

  it('is answered 503 with Retry-After over HTTP, without WWW-Authenticate', async () => {
    issuer = await startIssuer();
    issuer.jwks = 500;
    const gateway = await startGateway({}, { authenticator: authenticator(), issuer: issuer.url });
    try {
      const res = await fetch(gateway.url, {
        method: 'POST',
        headers: { ...MCP_POST_HEADERS, authorization: `Bearer ${await token()}` },
        body: INITIALIZE_BODY,
      });
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('2');
      expect(res.headers.get('www-authenticate')).toBeNull();
      expect(JSON.stringify(await res.json())).toMatch(/answered HTTP 500/);
    } finally {
      await gateway.close();
    }
  });

  it('is tried once while the issuer is down, then again after the retry pause', async () => {
    issuer = await startIssuer();
    issuer.jwks = 503;
    const a = authenticator(300);
    const t = await token();
    for (let i = 0; i < 10; i++) await expect(a.authenticate(t)).rejects.toThrow(/answered HTTP 503/);
    expect(jwksFetches()).toBe(1);
    issuer.jwks = 'ok';
    await sleep(400);
    expect(await a.authenticate(t)).toMatchObject({ ok: true });
    expect(jwksFetches()).toBe(2);
  });

  it('when jose refetches its 10-minute-old copy: unavailable, not a refused token', async () => {
    issuer = await startIssuer();
    vi.useFakeTimers({ toFake: ['Date'] });
    const a = authenticator();
    expect(await a.authenticate(await token())).toMatchObject({ ok: true });
    issuer.jwks = 500;
    vi.setSystemTime(Date.now() + 11 * 60_000);
    await expect(a.authenticate(await token())).rejects.toThrow(/answered HTTP 500/);
    expect(jwksFetches()).toBe(2);
  });

  it('leaves the keys jose holds usable: a token of an unknown key cannot shut the known ones out', async () => {
    issuer = await startIssuer();
    vi.useFakeTimers({ toFake: ['Date'] });
    const a = authenticator();
    expect(await a.authenticate(await token())).toMatchObject({ ok: true });
    issuer.jwks = 500;
    // Past jose's 30 s pause between fetches for unknown keys.
    vi.setSystemTime(Date.now() + 31_000);
    const unknown = await token({ key: otherKey, kid: 'k2' });
    await expect(a.authenticate(unknown)).rejects.toThrow(/answered HTTP 500/);
    expect(await a.authenticate(await token())).toMatchObject({ ok: true });
    await expect(a.authenticate(unknown)).rejects.toThrow(/answered HTTP 500/);
    expect(jwksFetches()).toBe(2);
  });
});

afterAll(() => vi.useRealTimers());
