// search_tools and the capability resource through real MCP clients of both eras, over an
// UpstreamRegistry of plain entries (the Kubernetes side is tested in test/e2e/upstreams.test.ts).
import type { AddressInfo } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client as V2Client, StreamableHTTPClientTransport as V2Transport } from '@modelcontextprotocol/client';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createApp } from '../../../src/gateway/app.js';
import { ToolFilter } from '../../../src/upstreams/policy.js';
import { Upstreams } from '../../../src/upstreams/registry.js';
import { UpstreamError } from '../../../src/upstreams/types.js';
import { InTestRunService, TEST_OPTIONS } from './harness.js';

const registry = new Upstreams();
registry.set({
  name: 'everything',
  access: undefined,
  filter: new ToolFilter({ deny: ['get-tiny-image'] }),
  callTimeoutMs: 60_000,
  ready: true,
  reason: 'CatalogLoaded',
  tools: [
    {
      server: 'everything',
      name: 'echo',
      description: 'Echoes back the input string',
      inputSchema: { type: 'object', properties: { message: { type: 'string' } }, required: ['message'] },
    },
    {
      server: 'everything',
      name: 'get-sum',
      description: 'Returns the sum of two numbers',
      inputSchema: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] },
    },
  ],
});
registry.set({
  name: 'private',
  access: { users: ['alice'] },
  filter: new ToolFilter(undefined),
  callTimeoutMs: 1000,
  ready: true,
  reason: 'CatalogLoaded',
  tools: [{ server: 'private', name: 'echo', inputSchema: {} }],
});

let server: ServerType;
let url: URL;

beforeAll(async () => {
  const app = createApp({
    runService: new InTestRunService(),
    options: TEST_OPTIONS,
    logger: pino({ level: 'silent' }),
    isReady: () => true,
    upstreams: registry,
  });
  server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
  await new Promise<void>((r) => server.once('listening', () => r()));
  url = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`);
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

interface Result {
  content: Array<{ type: string; text?: string }>;
  structuredContent?: unknown;
  isError?: boolean;
}
interface Kind {
  call(args: Record<string, unknown>): Promise<Result>;
  read(): Promise<string>;
  close(): Promise<void>;
}

async function client(kind: 'v1' | 'v2'): Promise<Kind> {
  if (kind === 'v1') {
    const c = new V1Client({ name: 't', version: '1' });
    await c.connect(new V1Transport(url));
    return {
      call: async (args) => (await c.callTool({ name: 'search_tools', arguments: args })) as Result,
      read: async () => String(((await c.readResource({ uri: 'codemode://upstreams' })).contents[0] as { text?: string } | undefined)?.text),
      close: () => c.close(),
    };
  }
  const c = new V2Client({ name: 't', version: '2' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  await c.connect(new V2Transport(url));
  return {
    call: async (args) => (await c.callTool({ name: 'search_tools', arguments: args })) as Result,
    read: async () => String(((await c.readResource({ uri: 'codemode://upstreams' })).contents[0] as { text?: string } | undefined)?.text),
    close: () => c.close(),
  };
}

describe.each(['v1', 'v2'] as const)('search_tools (%s client)', (kind) => {
  it('returns ranked signatures of the servers the caller may use', async () => {
    const c = await client(kind);
    try {
      const r = await c.call({ query: 'echo a message' });
      expect(r.isError).toBeFalsy();
      expect(r.content[0]?.text?.split('\n')[0]).toBe('everything.echo(message: string) — Echoes back the input string');
      // A caller the gateway cannot name (no auth wired here) does not see the restricted server.
      expect((r.structuredContent as { results: Array<{ server: string }> }).results.map((h) => h.server)).toEqual(['everything']);
    } finally {
      await c.close();
    }
  });

  it.each<[string, Record<string, unknown>, RegExp]>([
    ['an empty query', { query: '  ' }, /query must not be empty/],
    ['a limit beyond 50', { query: 'echo', limit: 51 }, /limit/],
  ])('refuses %s with a clear error', async (_name, args, message) => {
    const c = await client(kind);
    try {
      const r = await c.call(args);
      expect(r.isError).toBe(true);
      expect(r.content.map((p) => p.text).join(' ')).toMatch(message);
    } finally {
      await c.close();
    }
  });

  it("says when to retry once the caller's searches took their share of the gateway's time", async () => {
    const c = await client(kind);
    const spy = vi.spyOn(registry, 'search').mockImplementationOnce(() => {
      throw new UpstreamError('search_limit', "Your searches took more than 100 ms of the gateway's time a second (after 1000 ms). Retry in 2 s.");
    });
    try {
      const r = await c.call({ query: 'echo' });
      expect(r.isError).toBe(true);
      expect(r.content[0]?.text).toMatch(/^Your searches took more than 100 ms .*Retry in 2 s\.$/);
      expect((await c.call({ query: 'echo' })).isError).toBeFalsy();
    } finally {
      spy.mockRestore();
      await c.close();
    }
  });

  it('says when nothing matched', async () => {
    const c = await client(kind);
    try {
      expect((await c.call({ query: 'zzzz qqqq' })).content[0]?.text).toBe('No tool matched. Try other words; servers: everything.');
    } finally {
      await c.close();
    }
  });

  it('serves the capability summary as a resource', async () => {
    const c = await client(kind);
    try {
      const text = await c.read();
      expect(text).toContain('- everything: ready, 2 tools, calls time out after 60 s');
      expect(text).not.toContain('private');
    } finally {
      await c.close();
    }
  });
});
