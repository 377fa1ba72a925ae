// Host/Origin allow-list rules as tables, then the middleware over real HTTP.
import { afterEach, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { TOKENS_KEY, TokensAuthenticator } from '../../../src/auth/tokens.js';
import { isAllowedHost, isAllowedOrigin } from '../../../src/gateway/host-validation.js';
import { INITIALIZE_BODY, MCP_POST_HEADERS, rawRequest, startGateway } from './harness.js';
import type { Gateway } from './harness.js';

describe('isAllowedHost', () => {
  const allowed = ['codemode.example.com', 'Internal.Example.com:8443', 'codemode.codemode-system.svc'];
  it.each([
    ['localhost', true],
    ['localhost:8080', true],
    ['127.0.0.1:3000', true],
    ['[::1]:3000', true],
    ['LOCALHOST', true],
    ['codemode.example.com', true],
    ['codemode.example.com:9000', true], // no port in the entry: any port
    ['internal.example.com:8443', true],
    ['internal.example.com:80', false], // port in the entry: that port only
    ['codemode.codemode-system.svc:8080', true],
    ['evil.example.com', false],
    ['codemode.example.com.evil.net', false],
    ['127.0.0.2', false],
    ['localhost@evil.example.com', false],
    ['evil.example.com/localhost', false],
    ['', false],
    [undefined, false],
  ])('Host %j → %s', (host, expected) => {
    expect(isAllowedHost(host, allowed)).toBe(expected);
  });
});

describe('isAllowedOrigin', () => {
  const allowed = ['https://app.example.com', 'tools.example.com'];
  it.each([
    [undefined, true],
    ['', true],
    ['http://localhost:5173', true],
    ['http://127.0.0.1', true],
    ['http://[::1]:8080', true],
    ['https://app.example.com', true],
    ['https://app.example.com:443', true],
    ['http://app.example.com', false], // full origin in the entry: scheme and port must match
    ['https://app.example.com:8443', false],
    ['https://tools.example.com:8443', true], // bare hostname: any scheme and port
    ['https://evil.example.com', false],
    ['null', false],
    ['not a url', false],
  ])('Origin %j → %s', (origin, expected) => {
    expect(isAllowedOrigin(origin, allowed)).toBe(expected);
  });
});

describe('Host/Origin middleware on /mcp', () => {
  let gateway: Gateway;
  afterEach(async () => {
    await gateway.close();
  });

  const post = (headers: Record<string, string>) =>
    rawRequest(gateway.port, '/mcp', { method: 'POST', headers: { ...MCP_POST_HEADERS, ...headers }, body: INITIALIZE_BODY });

  it('refuses a Host that is not allowed with 403 naming the header and the env var', async () => {
    gateway = await startGateway();
    const res = await post({ host: 'attacker.example:8080' });
    expect(res.status).toBe(403);
    const body = JSON.parse(res.body);
    expect(body.error.message).toContain('Host header "attacker.example:8080" is not allowed');
    expect(body.error.message).toContain('CODEMODE_ALLOWED_HOSTS');
    expect(body.error.data).toEqual({ header: 'Host', env: 'CODEMODE_ALLOWED_HOSTS' });
  });

  it('refuses an Origin that is not allowed with 403 naming the header and the env var', async () => {
    gateway = await startGateway();
    const res = await post({ host: `127.0.0.1:${gateway.port}`, origin: 'https://evil.example' });
    expect(res.status).toBe(403);
    const body = JSON.parse(res.body);
    expect(body.error.message).toContain('Origin header "https://evil.example" is not allowed');
    expect(body.error.data).toEqual({ header: 'Origin', env: 'CODEMODE_ALLOWED_ORIGINS' });
  });

  it('accepts a Host and Origin allowed by the options', async () => {
    gateway = await startGateway({
      allowedHosts: ['codemode.example.com'],
      allowedOrigins: ['https://app.example.com'],
    });
    const res = await post({ host: 'codemode.example.com:8080', origin: 'https://app.example.com' });
    expect(res.status).toBe(200);
    expect(res.body).toContain('"serverInfo":{"name":"codemode-operator"');
  });

  it('does not apply to the probes, which the kubelet calls by pod IP', async () => {
    gateway = await startGateway();
    const res = await rawRequest(gateway.port, '/healthz', { headers: { host: '10.244.0.17:8080' } });
    expect(res).toEqual({ status: 200, body: 'ok' });
  });
});

describe('Host/Origin middleware on the OAuth protected-resource metadata', () => {
  // Without CODEMODE_PUBLIC_URL the metadata names the resource by the request's Host: unchecked,
  // anyone could make the gateway name another server as its resource (a cache in front of it
  // would keep that answer for everyone).
  let gateway: Gateway;
  afterEach(async () => {
    await gateway.close();
  });
  const tokens = new TokensAuthenticator(pino({ level: 'silent' }));
  tokens.load({ data: { [TOKENS_KEY]: Buffer.from('tok-alice-aaaaaaaaaaaaaaaa,alice,1\n').toString('base64') } });

  it.each([
    ['/.well-known/oauth-protected-resource', 'evil.example.com', 403, undefined],
    ['/.well-known/oauth-protected-resource/mcp', 'evil.example.com:443', 403, undefined],
    ['/.well-known/oauth-protected-resource', 'mcp.example.com', 200, 'http://mcp.example.com/mcp'],
    ['/.well-known/oauth-protected-resource/mcp', 'mcp.example.com:8443', 200, 'http://mcp.example.com:8443/mcp'],
    ['/.well-known/oauth-protected-resource/mcp', 'localhost:3000', 200, 'http://localhost:3000/mcp'],
  ])('%s with Host %s → %i', async (path, host, status, resource) => {
    gateway = await startGateway({ allowedHosts: ['mcp.example.com'] }, { authenticator: tokens });
    const res = await rawRequest(gateway.port, path, { headers: { host } });
    expect(res.status).toBe(status);
    if (resource === undefined) expect(JSON.parse(res.body)).toMatchObject({ error: { data: { header: 'Host', env: 'CODEMODE_ALLOWED_HOSTS' } } });
    else expect(JSON.parse(res.body)).toMatchObject({ resource });
  });
});
