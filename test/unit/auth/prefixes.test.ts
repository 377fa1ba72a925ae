// CODEMODE_USERNAME_PREFIX / CODEMODE_GROUPS_PREFIX: the names the gateway authenticates itself are
// kept apart from the cluster's, as the API server's --oidc-username-prefix does, so that a cluster
// user `bob` (who may create SandboxRuns with kubectl, naming himself as owner) is not the owner of
// gateway user `bob`'s sessions. Through createAuth as the gateway builds it, with a local OIDC
// issuer and a real MCP client.
import { KubeConfig } from '@kubernetes/client-node';
import { SignJWT, type CryptoKey } from 'jose';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAuth } from '../../../src/auth/index.js';
import { withPrefixes } from '../../../src/auth/identity.js';
import { loadConfig } from '../../../src/config/index.js';
import { makeClients } from '../../../src/kube/clients.js';
import { connectClient, startGateway, type Gateway } from '../gateway/harness.js';
import { startIssuer, type LocalIssuer } from './issuer.js';

describe('withPrefixes', () => {
  it.each([
    ['no prefixes: the same identity', {}, { user: 'bob', groups: ['dev'] }],
    ['empty prefixes: the same identity', { user: '', groups: '' }, { user: 'bob', groups: ['dev'] }],
    ['a user prefix only', { user: 'gw:' }, { user: 'gw:bob', groups: ['dev'] }],
    ['a groups prefix only', { groups: 'gw:' }, { user: 'bob', groups: ['gw:dev'] }],
    ['both', { user: 'oidc:', groups: 'oidc:' }, { user: 'oidc:bob', groups: ['oidc:dev'] }],
  ])('%s', (_n, prefixes, expected) => {
    expect(withPrefixes({ user: 'bob', groups: ['dev'] }, prefixes)).toEqual(expected);
  });
});

const AUDIENCE = 'https://gateway.example/mcp';
let localIssuer: LocalIssuer;
let key: CryptoKey;
let gateway: Gateway;

beforeAll(async () => {
  localIssuer = await startIssuer();
  key = localIssuer.key;
  const config = loadConfig({
    CODEMODE_AUTH_MODE: 'oidc',
    CODEMODE_OIDC_ISSUER: localIssuer.url,
    CODEMODE_OIDC_AUDIENCE: AUDIENCE,
    CODEMODE_USERNAME_PREFIX: 'gw:',
    CODEMODE_GROUPS_PREFIX: 'gwg:',
  });
  // Mode oidc asks nothing of the API server: clients of a cluster that is never contacted.
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'none', server: 'https://127.0.0.1:1', skipTLSVerify: false }],
    users: [{ name: 'none' }],
    contexts: [{ name: 'none', cluster: 'none', user: 'none' }],
    currentContext: 'none',
  });
  const auth = createAuth(config, makeClients(kc), pino({ level: 'silent' }));
  gateway = await startGateway({}, auth.http);
  gateway.setReady(true);
});
afterAll(async () => {
  await gateway?.close();
  await localIssuer?.close();
});

const token = (sub: string, groups: string[]): Promise<string> =>
  new SignJWT({ groups })
    .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
    .setIssuer(localIssuer.url)
    .setAudience(AUDIENCE)
    .setSubject(sub)
    .setIssuedAt()
    .setExpirationTime('5m')
    .sign(key);

describe('a gateway with both prefixes (mode oidc)', () => {
  it('records its caller with them, as owner of what the call creates', async () => {
    const client = await connectClient('v2 (2026-07-28)', gateway.url, { authorization: `Bearer ${await token('bob', ['dev', 'ops'])}` });
    try {
      const r = await client.callTool({ code: 'print(1)' });
      expect(r.isError ?? false).toBe(false);
    } finally {
      await client.close();
    }
    expect(gateway.service.calls.at(-1)?.request.owner).toEqual({ user: 'gw:bob', groups: ['gwg:dev', 'gwg:ops'] });
  });

  it('refuses a name that the prefix makes too long to record, saying so (403)', async () => {
    const res = await fetch(gateway.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: `Bearer ${await token('b'.repeat(254), [])}`,
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
    });
    expect(res.status).toBe(403);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/257 characters long; at most 256/);
  });
});
