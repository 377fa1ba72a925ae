// Mode oidc end to end over HTTP: a local issuer with generated keys (discovery + JWKS), the
// gateway as a resource server, real MCP clients of both eras with bearer tokens.
import { SignJWT, generateKeyPair, type CryptoKey } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OidcAuthenticator } from '../../../src/auth/oidc.js';
import { connectClient, startGateway, type Gateway } from '../gateway/harness.js';
import { startIssuer, type LocalIssuer } from './issuer.js';

const AUDIENCE = 'https://gateway.example/mcp';
let localIssuer: LocalIssuer;
let issuer = '';
let key: CryptoKey;
let otherKey: CryptoKey;
let gateway: Gateway;

beforeAll(async () => {
  ({ privateKey: otherKey } = await generateKeyPair('RS256'));
  localIssuer = await startIssuer();
  ({ url: issuer, key } = localIssuer);
  const authenticator = new OidcAuthenticator({ issuer, audience: AUDIENCE, usernameClaim: 'sub', groupsClaim: 'groups' });
  gateway = await startGateway({}, { authenticator, issuer });
});
afterAll(async () => {
  await gateway?.close();
  await localIssuer?.close();
});

async function token(o: { key?: CryptoKey; aud?: string; iss?: string; exp?: number | string; sub?: string } = {}): Promise<string> {
  return new SignJWT({ groups: ['dev'] })
    .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
    .setIssuer(o.iss ?? issuer)
    .setAudience(o.aud ?? AUDIENCE)
    .setSubject(o.sub ?? 'alice')
    .setIssuedAt()
    .setExpirationTime(o.exp ?? '5m')
    .sign(o.key ?? key);
}

const post = (auth?: string): Promise<Response> =>
  fetch(gateway.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...(auth && { authorization: auth }) },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } },
    }),
  });

describe('OIDC resource server', () => {
  it.each(['v1 (2025-era)', 'v2 (2026-07-28)'] as const)('serves a %s client with a valid token', async (kind) => {
    const client = await connectClient(kind, gateway.url, { authorization: `Bearer ${await token()}` });
    const r = await client.callTool({ code: 'print(1)' });
    expect(r.isError ?? false).toBe(false);
    await client.close();
  });

  it.each([
    ['no token', async () => undefined, 'invalid_request', /No bearer token/],
    ['not a JWT', async () => 'Bearer not-a-jwt', 'invalid_token', /not a valid JWT/],
    ['expired', async () => `Bearer ${await token({ exp: Math.floor(Date.now() / 1000) - 60 })}`, 'invalid_token', /expired/],
    ['wrong audience', async () => `Bearer ${await token({ aud: 'https://elsewhere.example/mcp' })}`, 'invalid_token', /aud/],
    ['wrong issuer', async () => `Bearer ${await token({ iss: 'https://evil.example' })}`, 'invalid_token', /iss/],
    ['signed by another key', async () => `Bearer ${await token({ key: otherKey })}`, 'invalid_token', /not signed by the configured issuer/],
  ])('answers %s with 401 and a WWW-Authenticate header pointing to the metadata', async (_n, auth, error, description) => {
    const res = await post(await auth());
    expect(res.status).toBe(401);
    // Not kept alive: a client that never authenticates holds no connection of the replica's.
    expect(res.headers.get('connection')).toBe('close');
    const header = res.headers.get('www-authenticate') ?? '';
    expect(header).toMatch(new RegExp(`^Bearer resource_metadata="http://127\\.0\\.0\\.1:\\d+/\\.well-known/oauth-protected-resource/mcp", error="${error}"`));
    expect(header).toMatch(description);
  });

  it('serves the protected-resource metadata naming the issuer, at both well-known paths', async () => {
    for (const path of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp']) {
      const res = await fetch(new URL(path, gateway.url));
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ resource: `http://127.0.0.1:${gateway.port}/mcp`, authorization_servers: [issuer] });
    }
  });

  it('keeps probes reachable without a token', async () => {
    expect((await fetch(new URL('/healthz', gateway.url))).status).toBe(200);
  });
});

describe("the issuer's discovery", () => {
  const authenticate = async (a: OidcAuthenticator, n: number): Promise<PromiseSettledResult<unknown>[]> => {
    const t = await token();
    return Promise.allSettled(Array.from({ length: n }, () => a.authenticate(t)));
  };
  const discoveries = (i: LocalIssuer): number => i.requests.filter((r) => r === '/.well-known/openid-configuration').length;

  it('is made once for concurrent first requests', async () => {
    const own = await startIssuer();
    try {
      const a = new OidcAuthenticator({ issuer: own.url, audience: AUDIENCE, usernameClaim: 'sub', groupsClaim: 'groups' });
      const results = await authenticate(a, 20);
      // Signed by the shared issuer's key, not this one's: refused, after one discovery and one JWKS fetch.
      expect(results.every((r) => r.status === 'fulfilled' && (r.value as { ok: boolean }).ok === false)).toBe(true);
      expect(own.requests).toEqual(['/.well-known/openid-configuration', '/jwks']);
    } finally {
      await own.close();
    }
  });

  it('that failed answers the requests of the next moments itself (503), then is tried again', async () => {
    const own = await startIssuer();
    try {
      own.discoveryDown = true;
      const a = new OidcAuthenticator({ issuer: own.url, audience: AUDIENCE, usernameClaim: 'sub', groupsClaim: 'groups', retryMs: 300 });
      const first = await authenticate(a, 20);
      expect(first.every((r) => r.status === 'rejected' && /discovery .* answered 503/.test(String(r.reason)))).toBe(true);
      expect((await authenticate(a, 5)).every((r) => r.status === 'rejected')).toBe(true);
      expect(discoveries(own)).toBe(1);
      own.discoveryDown = false;
      await new Promise((r) => setTimeout(r, 400));
      expect((await authenticate(a, 5)).every((r) => r.status === 'fulfilled')).toBe(true);
      expect(discoveries(own)).toBe(2);
    } finally {
      await own.close();
    }
  });
});
