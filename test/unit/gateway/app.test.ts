// Probes and server identity of the gateway app, over real HTTP.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SERVER_NAME, SERVER_VERSION } from '../../../src/gateway/server.js';
import { MCP_POST_HEADERS, connectClient, rawRequest, startGateway } from './harness.js';
import type { Gateway } from './harness.js';

describe('gateway app', () => {
  let gateway: Gateway;
  beforeAll(async () => {
    gateway = await startGateway();
  });
  afterAll(async () => {
    await gateway.close();
  });

  it('answers /healthz with 200 ok', async () => {
    const res = await fetch(new URL('/healthz', gateway.url));
    expect([res.status, await res.text()]).toEqual([200, 'ok']);
  });

  it('answers /readyz with 503 and a reason until ready, then 200', async () => {
    const notReady = await fetch(new URL('/readyz', gateway.url));
    expect(notReady.status).toBe(503);
    expect(await notReady.text()).toMatch(/^not ready: /);
    gateway.setReady(true);
    const ready = await fetch(new URL('/readyz', gateway.url));
    expect([ready.status, await ready.text()]).toEqual([200, 'ok']);
  });

  it('keeps serving while draining, but closes every connection so the next request goes elsewhere', async () => {
    const initialize = (): Promise<Response> =>
      fetch(gateway.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } },
        }),
      });
    const before = await initialize();
    expect(before.headers.get('connection')).not.toBe('close');
    await before.body?.cancel();
    gateway.setDraining(true);
    try {
      const res = await initialize();
      expect(res.status).toBe(200);
      expect(res.headers.get('connection')).toBe('close');
      await res.body?.cancel();
      const client = await connectClient('v2 (2026-07-28)', gateway.url);
      expect(client.serverInfo()).toMatchObject({ name: SERVER_NAME });
      await client.close();
    } finally {
      gateway.setDraining(false);
    }
  });

  // Probes are fetched now and then (the kubelet's open a connection each time): kept alive,
  // anyone could hold connections with them against CODEMODE_MAX_CONNECTIONS.
  it.each(['/healthz', '/readyz', '/nowhere'])('closes the connection of %s after answering', async (path) => {
    const res = await fetch(new URL(path, gateway.url));
    expect(res.headers.get('connection')).toBe('close');
    await res.body?.cancel();
  });

  it('keeps SERVER_VERSION equal to package.json', () => {
    const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8'));
    expect(SERVER_VERSION).toBe(pkg.version);
  });

  it.each(['v1 (2025-era)', 'v2 (2026-07-28)'] as const)('identifies itself with instructions to the %s client', async (kind) => {
    const client = await connectClient(kind, gateway.url);
    expect(client.serverInfo()).toMatchObject({ name: SERVER_NAME, version: SERVER_VERSION });
    expect(client.instructions()).toContain('execute_code');
    await client.close();
  });

  // 2026-07-28 carries the level in each request's envelope and has no logging/setLevel (its
  // client refuses to send it); 2025-era clients set it with logging/setLevel (was -32601).
  it.each([
    ['v1 (2025-era)', true],
    ['v2 (2026-07-28)', false],
  ] as const)('declares the logging capability to the %s client (logging/setLevel: %s)', async (kind, setLevel) => {
    const client = await connectClient(kind, gateway.url);
    try {
      expect(client.capabilities()).toHaveProperty('logging');
      if (setLevel) await expect(client.setLoggingLevel('warning')).resolves.toEqual({});
    } finally {
      await client.close();
    }
  });

  it('answers 2025-era session operations with 405: there are no sessions to resume', async () => {
    const res = await fetch(gateway.url, { method: 'GET', headers: { accept: 'text/event-stream' } });
    expect(res.status).toBe(405);
  });

  // The SDK reports the requests it refuses (debug level) with messages that quote the request:
  // the line keeps the library's words, never the client's, and stays short whatever it sent.
  it('logs a refused MCP request without what the client sent', async () => {
    const before = gateway.logLines.length;
    const name = `execute_code${'S'.repeat(1_000_000)}`;
    const meta = {
      'io.modelcontextprotocol/protocolVersion': '2026-07-28',
      'io.modelcontextprotocol/clientCapabilities': {},
      'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '0' },
    };
    const res = await rawRequest(gateway.port, '/mcp', {
      method: 'POST',
      headers: { ...MCP_POST_HEADERS, 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 'HEADERSECRET' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: { code: 'x' }, _meta: meta } }),
    });
    expect(res.status).toBe(400);
    const lines = gateway.logLines.slice(before).filter((l) => l.includes('Rejected MCP request'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('Rejected inbound request (name-header-mismatch)');
    expect(lines[0]).not.toMatch(/HEADERSECRET|SSSS/);
    expect(lines[0]?.length).toBeLessThan(1000);
  });
});
