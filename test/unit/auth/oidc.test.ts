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
