// UpstreamConnection against a real MCP server built with the official SDK (v1 line, stateful
// Streamable HTTP, as most deployed servers are) in this process: the catalog follows
// notifications/tools/list_changed, a slow tool hits the call timeout, a tool error stays a
// result, and a server that restarts is reconnected to. No cluster needed.
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { UpstreamConnection, type ConnectionState } from '../../src/upstreams/connection.js';
import { UpstreamError } from '../../src/upstreams/types.js';
import { until } from './helpers/kube.js';

interface SdkServer {
  server: Server;
  port: number;
  servers: McpServer[];
  addTool(name: string): void;
  /** Sessions initialized, and ended by the client's DELETE. */
  sessions: { opened: number; ended: number };
}

/**
 * Sees each POSTed message (its method) before the server does: 'pass' lets the server answer,
 * 'fail' answers 500 instead. May wait, to hold the answer back.
 */
type Intercept = (method: string | undefined) => Promise<'pass' | 'fail'>;

/**
 * A stateful SDK server; every session's McpServer gets the tools `extra` lists too. With
 * `strangerFirst`, whatever comes on its first TCP connection is answered as something else at
 * that address would (404, empty body, the connection kept alive), as an egress proxy answered a
 * Service's ClusterIP before kube-proxy routed it (src/upstreams/http-pool.ts).
 */
function startSdkServer(port = 0, intercept?: Intercept, strangerFirst = false): Promise<SdkServer> {
  const sessions = { opened: 0, ended: 0 };
  const servers: McpServer[] = [];
  const extra: string[] = [];
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const build = (): McpServer => {
    const s = new McpServer({ name: 'sdk-upstream', version: '1.0.0' }, { capabilities: { tools: { listChanged: true } } });
    s.registerTool('echo', { description: 'Echoes back the input string', inputSchema: { message: z.string() } }, ({ message }) => ({
      content: [{ type: 'text', text: message }],
    }));
    s.registerTool('slow', { description: 'Sleeps for a while', inputSchema: {} }, async () => {
      await new Promise((r) => setTimeout(r, 5_000));
      return { content: [{ type: 'text', text: 'late' }] };
    });
    s.registerTool('fail', { description: 'Always fails', inputSchema: {} }, () => ({ content: [{ type: 'text', text: 'it broke' }], isError: true }));
    for (const name of extra) s.registerTool(name, { description: `Added later: ${name}`, inputSchema: {} }, () => ({ content: [] }));
    servers.push(s);
    return s;
  };
  let first: unknown;
  const server = createServer((req, res) => {
    first ??= strangerFirst ? req.socket : null;
    if (req.socket === first) {
      req.resume();
      res.writeHead(404, { server: 'stranger', 'content-length': '0' }).end();
      return;
    }
    void (async (): Promise<void> => {
      let body: unknown;
      if (req.method === 'POST') {
        const chunks: Buffer[] = [];
        for await (const c of req) chunks.push(c as Buffer);
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        const method = (body as { method?: unknown }).method;
        if ((await intercept?.(typeof method === 'string' ? method : undefined)) === 'fail') {
          res.writeHead(500).end();
          return;
        }
      }
      const sid = req.headers['mcp-session-id'];
      let t = typeof sid === 'string' ? transports.get(sid) : undefined;
      if (!t) {
        if (sid) {
          res.writeHead(404).end();
          return;
        }
        const transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (id) => {
            sessions.opened++;
            transports.set(id, transport);
          },
          onsessionclosed: () => void sessions.ended++,
        });
        await build().connect(transport);
        t = transport;
      }
      await t.handleRequest(req, res, body);
    })().catch(() => res.destroy());
  });
  return new Promise((resolve) =>
    server.listen(port, '127.0.0.1', () =>
      resolve({
        server,
        port: (server.address() as AddressInfo).port,
        servers,
        sessions,
        addTool(name: string): void {
          extra.push(name);
          for (const s of servers) s.registerTool(name, { description: `Added later: ${name}`, inputSchema: {} }, () => ({ content: [] }));
        },
      }),
    ),
  );
}

/** A connection (not started) to a test server, pinging every 500 ms. */
function connectionTo(name: string, srv: SdkServer, onState: (s: ConnectionState) => void = () => undefined): UpstreamConnection {
  return new UpstreamConnection(
    name,
    { url: `http://127.0.0.1:${srv.port}/mcp`, headers: {} },
    { healthIntervalMs: 500, requestTimeoutMs: 3_000, messageMaxBytes: 65_536, onState, log: pino({ level: 'silent' }) },
  );
}

async function closeServer(srv: SdkServer | undefined): Promise<void> {
  srv?.server.closeAllConnections();
  await new Promise<void>((r) => (srv ? srv.server.close(() => r()) : r()));
}

let sdk: SdkServer;
let conn: UpstreamConnection;
const states: ConnectionState[] = [];

beforeAll(async () => {
  sdk = await startSdkServer();
  conn = connectionTo('sdk', sdk, (s) => void states.push(s));
  conn.start();
  await until(() => conn.state.ready, 30_000, 'connected');
});

afterAll(async () => {
  await conn?.stop();
  await closeServer(sdk);
});

const names = (): string[] => conn.state.tools.map((t) => t.name).sort();

describe('UpstreamConnection against an SDK server', () => {
  it('lists the catalog and follows notifications/tools/list_changed', async () => {
    expect(names()).toEqual(['echo', 'fail', 'slow']);
    sdk.addTool('added_later');
    await until(() => names().includes('added_later'), 30_000, 'the new tool after list_changed');
  });

  it('calls a tool, keeps a tool error as a result, and times out a slow call', async () => {
    expect(await conn.call('echo', { message: 'hi' }, 5_000)).toMatchObject({ content: [{ type: 'text', text: 'hi' }] });
    expect(await conn.call('fail', {}, 5_000)).toMatchObject({ isError: true, content: [{ type: 'text', text: 'it broke' }] });
    const err = await conn.call('slow', {}, 200).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UpstreamError);
    expect((err as UpstreamError).code).toBe('timeout');
    const aborted = await conn.call('slow', {}, 5_000, AbortSignal.timeout(100)).catch((e: unknown) => e);
    expect((aborted as UpstreamError).code).toBe('aborted');
  });

  it('fails a call whose answer is larger than the message bound, at once, and stays connected', async () => {
    const err = await conn.call('echo', { message: 'x'.repeat(100_000) }, 10_000).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UpstreamError);
    expect((err as UpstreamError).code).toBe('upstream_failed');
    expect((err as UpstreamError).message).toMatch(/sdk\.echo failed: .*larger than 65536 bytes \(CODEMODE_UPSTREAM_MESSAGE_MAX_BYTES\)/);
    expect(conn.state.ready).toBe(true);
    expect(await conn.call('echo', { message: 'still here' }, 5_000)).toMatchObject({ content: [{ type: 'text', text: 'still here' }] });
  });

  it('ends the MCP session of a connect that stop() overtook, so the server keeps nothing open', async () => {
    // stop() while the SDK's protocol probe is in flight. The probe is answered; the connect's next
    // requests are refused on the client (its connections are closed for new requests), or, if
    // they went out, the session they opened must get its DELETE (a stdio bridge would keep a
    // process for it).
    let probing!: () => void;
    const inFlight = new Promise<void>((r) => (probing = r));
    let answered = false;
    let first = true;
    const slow = await startSdkServer(0, async () => {
      if (first) {
        first = false;
        probing();
        await new Promise((r) => setTimeout(r, 500));
        answered = true;
      }
      return 'pass';
    });
    const late = connectionTo('late', slow);
    try {
      late.start();
      await inFlight;
      await late.stop();
      await until(() => answered, 5_000, 'the probe to be answered');
      // What the connect sends after its probe comes at once; a session it opened is ended.
      await new Promise((r) => setTimeout(r, 1_000));
      await until(() => slow.sessions.ended === slow.sessions.opened, 15_000, 'every session the overtaken connect opened to be ended');
      expect(late.state.ready).toBe(false);
    } finally {
      await closeServer(slow);
    }
  });

  it('ends its MCP session on the server when stopped', async () => {
    const srv = await startSdkServer();
    const c = connectionTo('stopped', srv);
    try {
      c.start();
      await until(() => c.state.ready, 30_000, 'ready');
      await c.stop();
      expect(srv.sessions).toEqual({ opened: 1, ended: 1 });
    } finally {
      await closeServer(srv);
    }
  });

  it('ends the MCP session when the handshake fails after the server opened it, and connects on the next try', async () => {
    // The initialized notification fails once: the SDK closes the client itself (its transport
    // then sends nothing), so the DELETE for the session the server already opened is ours.
    let failures = 1;
    const flaky = await startSdkServer(0, async (method) => (method === 'notifications/initialized' && failures-- > 0 ? 'fail' : 'pass'));
    const c = connectionTo('flaky', flaky);
    try {
      c.start();
      await until(() => c.state.ready, 30_000, 'ready on the second try');
      // Two sessions opened (the failed handshake's and the live one); the first was ended.
      await until(() => flaky.sessions.opened === 2 && flaky.sessions.ended === 1, 15_000, 'the failed handshake’s session to be ended');
    } finally {
      await c.stop();
      await closeServer(flaky);
    }
  });

  it("connects over a new TCP connection after a failed try, never the last try's kept-alive one", async () => {
    const srv = await startSdkServer(0, undefined, true);
    const c = connectionTo('stranger-first', srv);
    try {
      c.start();
      await until(() => c.state.ready, 15_000, 'ready once a try comes on a new connection');
      expect(c.state.tools.map((t) => t.name)).toContain('echo');
    } finally {
      await c.stop();
      await closeServer(srv);
    }
  });

  it('notices a server that went away and reconnects when it is back', async () => {
    const port = sdk.port;
    await closeServer(sdk);
    await until(() => !conn.state.ready, 30_000, 'not ready after the server stopped');
    expect(conn.state.reason).toBe('Unreachable');
    expect(conn.state.error).toMatch(/ECONNREFUSED|fetch failed|closed/i);
    const notReady = await conn.call('echo', { message: 'x' }, 1_000).catch((e: unknown) => e);
    expect((notReady as UpstreamError).code).toBe('not_ready');
    sdk = await startSdkServer(port);
    await until(() => conn.state.ready, 30_000, 'ready after the server came back');
    expect(names()).toEqual(['echo', 'fail', 'slow']);
  });
});
