// The stand-ins for client-node's auth-provider plug-ins and proxy agents (src/kube/lazy-auth.ts,
// which the hook in slim-load.ts gives config.js): they cover every name config.js imports from
// those modules, config.js only constructs the plug-ins, and they answer and act as the real ones.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { AzureAuth as RealAzure } from '@kubernetes/client-node/dist/azure_auth.js';
import { GoogleCloudPlatformAuth as RealGcp } from '@kubernetes/client-node/dist/gcp_auth.js';
import { OpenIDConnectAuth as RealOidc } from '@kubernetes/client-node/dist/oidc_auth.js';
import { HttpProxyAgent as RealHttpProxyAgent, HttpsProxyAgent as RealHttpsProxyAgent } from 'hpagent';
import { SocksProxyAgent as RealSocksProxyAgent } from 'socks-proxy-agent';
import { describe, expect, it } from 'vitest';
import * as lazy from '../../../src/kube/lazy-auth.js';
import { isLazyAuthImport } from '../../../src/kube/slim-load.js';

const dist = dirname(createRequire(import.meta.url).resolve('@kubernetes/client-node/dist/config.js'));
const config = readFileSync(join(dist, 'config.js'), 'utf8');
const CONFIG_URL = 'file:///app/node_modules/@kubernetes/client-node/dist/config.js';

describe('isLazyAuthImport', () => {
  it.each<[string, string | undefined, boolean]>([
    ['./oidc_auth.js', CONFIG_URL, true],
    ['./azure_auth.js', CONFIG_URL, true],
    ['./gcp_auth.js', CONFIG_URL, true],
    ['socks', CONFIG_URL, true],
    ['socks-proxy-agent', CONFIG_URL, true],
    ['hpagent', CONFIG_URL, true],
    ['./exec_auth.js', CONFIG_URL, false],
    ['./oidc_auth.js', 'file:///app/node_modules/@kubernetes/client-node/dist/index.js', false],
    ['socks', 'file:///app/node_modules/socks-proxy-agent/dist/index.js', false],
    ['socks', undefined, false],
    ['toString', CONFIG_URL, false],
  ])('%s from %s: %s', (specifier, parent, expected) => {
    expect(isLazyAuthImport(specifier, parent)).toBe(expected);
  });
});

it('stands in for every name config.js imports from those modules, and only those', () => {
  const imports = [...config.matchAll(/^import\s*\{([^}]*)\}\s*from\s*'([^']+)';$/gm)];
  for (const [specifier, names] of Object.entries(lazy.LAZY_AUTH_IMPORTS)) {
    const imported = imports
      .filter((m) => m[2] === specifier)
      .flatMap((m) => (m[1] ?? '').split(','))
      .map((n) => n.trim())
      .filter(Boolean);
    expect(imported, specifier).toEqual(names);
    for (const n of names) expect(lazy, n).toHaveProperty(n);
  }
});

it('config.js only constructs the plug-ins and agents and calls SocksClient.createConnection', () => {
  const count = (re: RegExp): number => config.match(re)?.length ?? 0;
  for (const name of ['AzureAuth', 'GoogleCloudPlatformAuth', 'OpenIDConnectAuth', 'SocksProxyAgent', 'HttpProxyAgent', 'HttpsProxyAgent'])
    expect(count(new RegExp(`\\b${name}\\b`, 'g')), name).toBe(1 + count(new RegExp(`new ${name}\\(`, 'g')));
  expect(count(/\bSocksClient\b/g)).toBe(1 + count(/SocksClient\.createConnection\(/g));
});

// An unsigned JWT that expires in 2100: the OIDC plug-in uses it without asking the issuer.
const jwt = [{ alg: 'none' }, { exp: 4102444800, sub: 'u' }].map((p) => Buffer.from(JSON.stringify(p)).toString('base64url')).join('.') + '.sig';
const USERS: Array<[string, { name: string; authProvider?: unknown }]> = [
  ['no auth provider (a ServiceAccount token)', { name: 'sa' }],
  ['oidc', { name: 'o', authProvider: { name: 'oidc', config: { 'id-token': jwt, 'client-id': 'c', 'idp-issuer-url': 'https://issuer.invalid' } } }],
  ['azure', { name: 'a', authProvider: { name: 'azure', config: { 'access-token': 't', expiry: '2100-01-01T00:00:00Z' } } }],
  ['gcp', { name: 'g', authProvider: { name: 'gcp', config: { 'access-token': 't', expiry: '2100-01-01T00:00:00Z' } } }],
  ['another provider', { name: 'x', authProvider: { name: 'other' } }],
];
const PLUGINS = [
  ['AzureAuth', lazy.AzureAuth, RealAzure],
  ['GoogleCloudPlatformAuth', lazy.GoogleCloudPlatformAuth, RealGcp],
  ['OpenIDConnectAuth', lazy.OpenIDConnectAuth, RealOidc],
] as const;

describe.each(PLUGINS)('%s stand-in', (_name, Lazy, Real) => {
  it.each(USERS)('%s: handled exactly when the real one handles it, with the same headers', async (_what, user) => {
    const ours = new Lazy();
    const theirs = new Real();
    const handled = theirs.isAuthProvider(user as never);
    expect(ours.isAuthProvider(user)).toBe(handled);
    if (!handled) return;
    const a = { headers: {} as Record<string, string> };
    const b = { headers: {} as Record<string, string> };
    await ours.applyAuthentication(structuredClone(user), a);
    await theirs.applyAuthentication(structuredClone(user) as never, b as never);
    expect(a).toEqual(b);
    expect(a.headers.Authorization).toMatch(/^Bearer /);
  });
});

describe('proxy agent stand-ins', () => {
  it.each([
    ['SocksProxyAgent', () => new lazy.SocksProxyAgent('socks5://127.0.0.1:1080', {}), RealSocksProxyAgent],
    ['HttpProxyAgent', () => new lazy.HttpProxyAgent({ proxy: 'http://127.0.0.1:3128' }), RealHttpProxyAgent],
    ['HttpsProxyAgent', () => new lazy.HttpsProxyAgent({ proxy: 'http://127.0.0.1:3128' }), RealHttpsProxyAgent],
  ] as const)('new %s gives an instance of the real class', (_name, make, Real) => {
    expect(make()).toBeInstanceOf(Real);
  });

  it('SocksClient.createConnection reaches the real one (a refused proxy is reported to the callback)', async () => {
    const err = await new Promise<unknown>((resolve) => {
      lazy.SocksClient.createConnection(
        { proxy: { host: '127.0.0.1', port: 1, type: 5 }, command: 'connect', destination: { host: 'example.invalid', port: 443 } },
        (e: unknown) => resolve(e),
      );
    });
    expect(err).toBeInstanceOf(Error);
  });
});
