import { connect, type AddressInfo } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import { Hono } from 'hono';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { pino } from 'pino';
import { createApp } from '../../../src/gateway/app.js';
import { drainRefusing, drainSettled, markListen, McpTraffic } from '../../../src/gateway/drain.js';
import { InTestRunService, TEST_OPTIONS, connectClient, largeEventStream, outcome, sleep } from './harness.js';

const T = { minMs: 5000, quietMs: 2000 };

describe('drainSettled', () => {
  it.each([
    ['too early, though quiet', { inFlight: 0, lastArrival: 0 }, 0, 4999, false],
    ['a call in flight', { inFlight: 1, lastArrival: 0 }, 0, 60_000, false],
    ['a call arrived within the quiet period', { inFlight: 0, lastArrival: 59_000 }, 0, 60_000, false],
    ['quiet for exactly the period, after the minimum', { inFlight: 0, lastArrival: 58_000 }, 0, 60_000, true],
    ['no call ever, at the minimum', { inFlight: 0, lastArrival: 0 }, 1000, 6000, true],
  ])('%s', (_name, state, startedAt, now, expected) => {
    expect(drainSettled(state, startedAt, now, T)).toBe(expected);
  });

  const bounded = { ...T, maxMs: 10_000 };
  it.each([
    ['calls still arriving, before the bound', { inFlight: 0, lastArrival: 9_900 }, 0, 9_999, false, false],
    ['calls still arriving, at the bound: later ones are refused', { inFlight: 0, lastArrival: 9_900 }, 0, 10_000, true, true],
    ['at the bound, a call in flight is still answered first', { inFlight: 1, lastArrival: 9_900 }, 0, 10_000, true, false],
  ])('with a bound: %s', (_name, state, startedAt, now, refusing, expected) => {
    expect(drainRefusing(startedAt, now, bounded)).toBe(refusing);
    expect(drainSettled(state, startedAt, now, bounded)).toBe(expected);
  });
});

describe('McpTraffic', () => {
  let server: ServerType | undefined;
  afterEach(() => server?.close());

  async function serveApp(draining: () => boolean): Promise<{ url: string; traffic: McpTraffic }> {
    const app = new Hono();
    app.use(async (c, next) => {
      await next();
      if (draining()) c.header('Connection', 'close');
    });
    app.post('/mcp', async (c) => c.text(await c.req.text()));
    // A large result, more than the sockets' buffers take at once: whole, or streamed as a tool
    // call's (SSE) is.
    app.post('/mcp/large', (c) => c.text('r'.repeat(32 * 1024 * 1024)));
    app.post('/mcp/large-stream', () => largeEventStream());
    app.get('/healthz', (c) => c.text('ok'));
    const traffic = new McpTraffic(app.fetch);
    server = await new Promise<ServerType>((resolve) => {
      const s = serve({ fetch: traffic.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
    });
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, traffic };
  }

  it('keeps serving keep-alive clients through the drain without failing a call, and settles once they stop', async () => {
    let draining = false;
    const { url, traffic } = await serveApp(() => draining);
    let stop = false;
    const failures: string[] = [];
    let ok = 0;
    // Clients with connections left idle between calls, as MCP clients do.
    const client = async (): Promise<void> => {
      while (!stop) {
        try {
          const r = await fetch(`${url}/mcp`, { method: 'POST', body: 'x' });
          if ((await r.text()) === 'x') ok++;
        } catch (err) {
          failures.push(String((err as Error).cause ?? err));
        }
        await new Promise((r) => setTimeout(r, Math.random() * 400));
      }
    };
    const clients = Array.from({ length: 12 }, client);
    // A busy client process (as under a full test suite's load) learns late that a connection
    // closed: the event loop blocked now and then makes any close under a client show.
    const busy = setInterval(() => {
      const until = performance.now() + 30;
      while (performance.now() < until);
    }, 60);
    await new Promise((r) => setTimeout(r, 200));
    draining = true;
    const settled = traffic.settled({ minMs: 0, quietMs: 300 });
    let settledEarly = false;
    void settled.then(() => (settledEarly = !stop));
    await new Promise((r) => setTimeout(r, 1500));
    stop = true;
    clearInterval(busy);
    await Promise.all(clients);
    await settled;
    expect(failures).toEqual([]);
    expect(ok).toBeGreaterThan(12);
    // Calls kept arriving, so the drain did not end while they did.
    expect(settledEarly).toBe(false);
  });

  it('counts only /mcp: probes and scrapes do not hold a stopping replica', async () => {
    const { url, traffic } = await serveApp(() => true);
    const probes = setInterval(
      () =>
        void fetch(`${url}/healthz`).then(
          (r) => r.text(),
          () => undefined,
        ),
      20,
    );
    // Were probes counted, this would never settle while they come (the test would time out).
    const outcome = await Promise.race([
      traffic.settled({ minMs: 0, quietMs: 300 }).then(() => 'settled'),
      new Promise((r) => setTimeout(() => r('still draining'), 4000)),
    ]);
    clearInterval(probes);
    expect(outcome).toBe('settled');
  });

  it('ends the drain at its bound though a client keeps calling, and refuses its later calls with 503 and Retry-After', async () => {
    const { url, traffic } = await serveApp(() => true);
    const statuses: number[] = [];
    let stop = false;
    // A client calling the replica directly, never quiet for the quiet period.
    const caller = (async () => {
      while (!stop) {
        const r = await fetch(`${url}/mcp`, { method: 'POST', body: 'x' }).catch(() => undefined);
        if (r) {
          statuses.push(r.status);
          if (r.status === 503) expect(r.headers.get('retry-after')).toBe('1');
          await r.text();
        }
        await new Promise((res) => setTimeout(res, 50));
      }
    })();
    const outcome = await Promise.race([
      traffic.settled({ minMs: 0, quietMs: 300, maxMs: 600 }).then(() => 'settled'),
      new Promise((r) => setTimeout(() => r('still draining'), 3000)),
    ]);
    await new Promise((r) => setTimeout(r, 200));
    stop = true;
    await caller;
    expect(outcome).toBe('settled');
    // Served until the bound, refused after it.
    expect(statuses[0]).toBe(200);
    expect(statuses.at(-1)).toBe(503);
    expect(statuses.slice(statuses.indexOf(503))).toEqual(statuses.slice(statuses.indexOf(503)).map(() => 503));
  });

  // Once the drain settled the operator stops and releases its Lease: other replicas then fail the
  // runs it holds, so a call arriving later must not start one here — refused, to go elsewhere.
  it('refuses MCP calls from the moment the drain settled, before its bound; probes still answered', async () => {
    const { url, traffic } = await serveApp(() => true);
    expect((await fetch(`${url}/mcp`, { method: 'POST', body: 'x' })).status).toBe(200);
    await traffic.settled({ minMs: 0, quietMs: 100, maxMs: 60_000 });
    const late = await fetch(`${url}/mcp`, { method: 'POST', body: 'x' });
    expect(late.status).toBe(503);
    expect(late.headers.get('retry-after')).toBe('1');
    expect((await fetch(`${url}/healthz`)).status).not.toBe(503);
  });

  /** A server whose /mcp answers with a stream of `ms`, marked a listen when asked. */
  async function serveStream(ms: number, listen: boolean): Promise<{ url: string; traffic: McpTraffic }> {
    const app = new Hono();
    app.post('/mcp', (c) => {
      if (listen) markListen(c.req.raw);
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new TextEncoder().encode(': open\n\n'));
          if (Number.isFinite(ms)) setTimeout(() => controller.close(), ms);
        },
      });
      return new Response(body, { headers: { 'content-type': 'text/event-stream' } });
    });
    const traffic = new McpTraffic(app.fetch);
    server = await new Promise<ServerType>((resolve) => {
      const s = serve({ fetch: traffic.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
    });
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, traffic };
  }

  it('counts a request in flight until its streamed response has ended, not until the handler returned it', async () => {
    const { url, traffic } = await serveStream(1500, false);
    const res = await fetch(`${url}/mcp`, { method: 'POST', body: '{}' });
    const read = res.text().then(() => performance.now());
    const settled = await traffic.settled({ minMs: 0, quietMs: 100 }).then(() => performance.now());
    expect(settled).toBeGreaterThanOrEqual(await read);
  });

  it('does not wait for a listen’s stream, which lasts as long as its client listens', async () => {
    const { url, traffic } = await serveStream(Infinity, true);
    const controller = new AbortController();
    const res = await fetch(`${url}/mcp`, { method: 'POST', body: '{}', signal: controller.signal });
    expect(res.status).toBe(200);
    const outcome = await Promise.race([
      traffic.settled({ minMs: 0, quietMs: 100 }).then(() => 'settled'),
      new Promise((r) => setTimeout(() => r('still draining'), 3000)),
    ]);
    controller.abort();
    expect(outcome).toBe('settled');
  });

  it.each(['v1 (2025-era)', 'v2 (2026-07-28)'] as const)('waits for an execute_code call of a %s client to be answered', async (kind) => {
    const service = new InTestRunService();
    let answered = false;
    let started = false;
    service.behaviour = async () => {
      started = true;
      await sleep(1500);
      return outcome({ stdout: 'ok' });
    };
    const app = createApp({ runService: service, options: TEST_OPTIONS, logger: pino({ level: 'silent' }), isReady: () => true });
    const traffic = new McpTraffic(app.fetch);
    server = await new Promise<ServerType>((resolve) => {
      const s = serve({ fetch: traffic.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
    });
    const client = await connectClient(kind, new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`));
    try {
      const call = client.callTool({ code: 'x' }).then((r) => (answered = true) && r);
      // The call is in flight (a fixed pause was not enough on a busy machine: the request had not
      // arrived, and nothing was in flight to wait for).
      await vi.waitFor(() => expect(started).toBe(true), { timeout: 10_000 });
      await traffic.settled({ minMs: 0, quietMs: 200 });
      expect(answered).toBe(true);
      const r = await call;
      expect(r.isError, JSON.stringify(r.content)).toBeFalsy();
    } finally {
      await client.close();
      (server as { closeAllConnections?: () => void }).closeAllConnections?.();
    }
  });

  it('does not wait for an open subscriptions/listen of a 2026-07-28 client', async () => {
    const app = createApp({ runService: new InTestRunService(), options: TEST_OPTIONS, logger: pino({ level: 'silent' }), isReady: () => true });
    const traffic = new McpTraffic(app.fetch);
    server = await new Promise<ServerType>((resolve) => {
      const s = serve({ fetch: traffic.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
    });
    const client = new Client({ name: 'drain-test', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
    await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`)));
    const open = await client.listen({ toolsListChanged: true });
    try {
      const outcome = await Promise.race([
        traffic.settled({ minMs: 0, quietMs: 100 }).then(() => 'settled'),
        new Promise((r) => setTimeout(() => r('still draining'), 3000)),
      ]);
      expect(outcome).toBe('settled');
    } finally {
      await open.close();
      await client.close();
      (server as { closeAllConnections?: () => void }).closeAllConnections?.();
    }
  });

  it.each(['/mcp/large', '/mcp/large-stream'])('does not wait for a client reading its result slowly once it has all been made (%s)', async (path) => {
    const { url, traffic } = await serveApp(() => true);
    const { hostname, port } = new URL(url);
    const socket = connect(Number(port), hostname);
    socket.on('error', () => undefined);
    await new Promise<void>((resolve) => socket.once('connect', resolve));
    // Never reads: the result waits in the replica's socket buffer.
    socket.pause();
    socket.write(`POST ${path} HTTP/1.1\r\nhost: ${hostname}:${port}\r\ncontent-length: 0\r\n\r\n`);
    await new Promise((r) => setTimeout(r, 300));
    const outcome = await Promise.race([
      traffic.settled({ minMs: 0, quietMs: 100 }).then(() => 'settled'),
      new Promise((r) => setTimeout(() => r('still draining'), 2000)),
    ]);
    socket.destroy();
    expect(outcome).toBe('settled');
  });
});
