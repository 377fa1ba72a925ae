// The schema the SDK client walks on every call to a 2026-era upstream, to mirror arguments into
// Mcp-Param-* headers (src/upstreams/param-headers.ts): only what that walk reads, once per listing.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/client';
import { createMcpHandler, fromJsonSchema, McpServer } from '@modelcontextprotocol/server';
import { pino } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { UpstreamConnection } from '../../../src/upstreams/connection.js';
import { headerSchema, MAX_HEADER_SCHEMA_DEPTH } from '../../../src/upstreams/param-headers.js';

const region = { type: 'string', 'x-mcp-header': 'Region' };

describe('headerSchema', () => {
  it.each<[string, unknown, unknown]>([
    ['no declaration', { type: 'object', properties: { q: { type: 'string' } } }, { type: 'object' }],
    ['not a schema', null, { type: 'object' }],
    [
      'a declaration, without its siblings',
      { type: 'object', properties: { region, q: { type: 'string', description: 'x'.repeat(100) } } },
      { properties: { region } },
    ],
    [
      'a nested declaration and the way to it',
      { type: 'object', required: ['a'], properties: { a: { type: 'object', properties: { region, b: {} } } } },
      { properties: { a: { properties: { region } } } },
    ],
    // The SDK refuses every header of a schema that declares one where it may not: so does this one.
    ['a declaration under items', { properties: { list: { type: 'array', items: region }, region } }, { properties: { list: { items: region }, region } }],
    ['a declaration in an anyOf', { properties: { v: { anyOf: [{ type: 'string' }, region] } } }, { properties: { v: { anyOf: [region] } } }],
    ['a declaration in $defs', { $defs: { r: region, s: { type: 'string' } } }, { $defs: { r: region } }],
    ['a declaration at the root', { type: 'object', 'x-mcp-header': 'Root' }, { type: 'object', 'x-mcp-header': 'Root' }],
  ])('%s', (_name, schema, expected) => {
    expect(headerSchema(schema)).toEqual(expected);
  });

  it('keeps a "__proto__" property name as a key', () => {
    const schema = JSON.parse('{"properties":{"__proto__":{"type":"string","x-mcp-header":"P"}}}') as object;
    expect(Object.keys((headerSchema(schema) as { properties: object }).properties)).toEqual(['__proto__']);
  });

  it('reads a schema once', () => {
    const schema = { properties: { region } };
    expect(headerSchema(schema)).toBe(headerSchema(schema));
  });

  it(`leaves out declarations nested deeper than ${MAX_HEADER_SCHEMA_DEPTH} levels`, () => {
    let deep: object = region;
    for (let i = 0; i < MAX_HEADER_SCHEMA_DEPTH + 10; i++) deep = { properties: { a: deep } };
    expect(headerSchema(deep)).toEqual({ type: 'object' });
  });
});

/** A 2026-era upstream (the SDK's own handler) with one tool `find`; records each request's Mcp-Param-Region. */
async function modernUpstream(inputSchema: object): Promise<{ url: string; regions: Array<string | undefined>; close: () => void }> {
  const regions: Array<string | undefined> = [];
  const handler = createMcpHandler(() => {
    const s = new McpServer({ name: 'modern', version: '1' });
    s.registerTool('find', { inputSchema: fromJsonSchema(inputSchema as never) }, () => ({ content: [{ type: 'text', text: 'found' }] }));
    return s;
  });
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    if (req.method === 'POST' && Buffer.concat(chunks).includes('"tools/call"')) regions.push(req.headers['mcp-param-region'] as string | undefined);
    const headers = Object.entries(req.headers).flatMap(([k, v]) => (typeof v === 'string' ? [[k, v] as [string, string]] : []));
    const r = await handler.fetch(
      new Request(`http://127.0.0.1${req.url ?? '/'}`, { method: req.method ?? 'GET', headers, ...(req.method === 'POST' && { body: Buffer.concat(chunks) }) }),
    );
    res.writeHead(r.status, Object.fromEntries(r.headers));
    res.flushHeaders();
    // Streamed: a subscription's stream stays open.
    if (r.body) for await (const c of r.body) res.write(c);
    res.end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${String((server.address() as AddressInfo).port)}/mcp`,
    regions,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

describe('a call to a 2026-era upstream', () => {
  const cleanup: Array<() => unknown> = [];
  afterEach(async () => {
    for (const done of cleanup.splice(0).reverse()) await done();
    vi.restoreAllMocks();
  });

  const many = Object.fromEntries(Array.from({ length: 2_000 }, (_, i) => [`p${i}`, { type: 'string', description: 'A parameter.' }]));
  it.each<[string, object]>([
    ['a small schema', { type: 'object', properties: { region, q: { type: 'string' } } }],
    ['a schema of 2,000 parameters', { type: 'object', properties: { ...many, region } }],
  ])('with %s mirrors the declared argument, and gives the SDK only the declaration to walk', async (_name, inputSchema) => {
    const up = await modernUpstream(inputSchema);
    cleanup.push(up.close);
    const conn = new UpstreamConnection(
      'modern',
      { url: up.url, headers: {} },
      { healthIntervalMs: 60_000, requestTimeoutMs: 5_000, messageMaxBytes: 16 << 20, onState: () => undefined, log: pino({ level: 'silent' }) },
    );
    cleanup.push(() => conn.stop());
    conn.start();
    await vi.waitFor(() => expect(conn.state.ready).toBe(true), { timeout: 5_000 });
    const callTool = vi.spyOn(Client.prototype, 'callTool');

    expect(await conn.call('find', { region: 'eu-west', q: 'x' }, 5_000)).toMatchObject({ content: [{ type: 'text', text: 'found' }] });
    expect(up.regions).toEqual(['eu-west']);
    expect(callTool.mock.calls[0]?.[1]?.toolDefinition).toEqual({ name: 'find', inputSchema: { properties: { region } } });
  });
});
