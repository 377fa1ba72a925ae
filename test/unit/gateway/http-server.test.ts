// The gateway's HTTP server keeps an idle caller's connection between calls seconds apart: Node's
// own default (5 s) closes it, and undici (Node's fetch) closes it after 4 s unless the server's
// Keep-Alive header says longer. Real sockets on the loopback address, Node's own fetch.
import dc from 'node:diagnostics_channel';
import type { Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { afterEach, describe, expect, it } from 'vitest';
import { closeServer, configureHttpServer, KEEP_ALIVE_TIMEOUT_MS } from '../../../src/gateway/http-server.js';
import { largeEventStream } from './harness.js';

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise<void>((r) => s.close(() => r()))));
});

/** A server answering `ok`, with the gateway's settings (at most `maxConnections`) or Node's defaults; its port. */
async function listen(maxConnections: number | undefined, firstRequestTimeoutMs?: number, waitingPerAddress?: number): Promise<number> {
  const app = new Hono().get('/', (c) => c.text('ok'));
  const server = await new Promise<Server>((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s as Server)) as Server;
  });
  if (maxConnections !== undefined) configureHttpServer(server, maxConnections, firstRequestTimeoutMs, waitingPerAddress);
  servers.push(server);
  return (server.address() as AddressInfo).port;
}

async function start(configure: boolean): Promise<string> {
  return `http://127.0.0.1:${await listen(configure ? 4096 : undefined)}/`;
}

/** Two requests 6 s apart (past both defaults); the connections the client opened for them. */
async function twoCallsApart(url: string): Promise<{ connections: number; keepAlive: string | null }> {
  let connections = 0;
  const port = new URL(url).port;
  const onConnected = (m: unknown): void => {
    if (String((m as { connectParams?: { port?: string | number } }).connectParams?.port) === port) connections++;
  };
  dc.subscribe('undici:client:connected', onConnected);
  try {
    const first = await fetch(url);
    const keepAlive = first.headers.get('keep-alive');
    expect(await first.text()).toBe('ok');
    await new Promise((r) => setTimeout(r, 6_000));
    expect(await (await fetch(url)).text()).toBe('ok');
    return { connections, keepAlive };
  } finally {
    dc.unsubscribe('undici:client:connected', onConnected);
  }
}

describe('the gateway HTTP server', () => {
  // A client holding many idle sockets: the connection over the limit is closed at once, unanswered,
  // while the open ones are served; once one closes, a new connection is served again.
  it('closes a connection over CODEMODE_MAX_CONNECTIONS at once and serves the open ones', async () => {
    const port = await listen(2);
    const request = (socket: Socket): Promise<string> =>
      new Promise((resolve) => {
        let text = '';
        socket.on('data', (d: Buffer) => {
          text += d.toString();
          if (text.includes('\r\n\r\nok')) resolve(text);
        });
        socket.on('close', () => resolve(text));
        socket.write(`GET / HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\n\r\n`);
      });
    const open = async (): Promise<Socket> => {
      const socket = connect(port, '127.0.0.1');
      await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
      return socket;
    };
    const held = [await open(), await open()];
    for (const s of held) expect(await request(s)).toMatch(/^HTTP\/1\.1 200/);
    const third = await open();
    expect(await request(third)).toBe(''); // closed without an answer
    held[0]?.destroy();
    await new Promise((r) => setTimeout(r, 100));
    const fourth = await open();
    expect(await request(fourth)).toMatch(/^HTTP\/1\.1 200/);
    expect(await request(held[1] as Socket)).toMatch(/^HTTP\/1\.1 200/);
    for (const s of [third, fourth, ...held]) s.destroy();
  });

  // Before anyone is authenticated a connection counts against the limit: one that sends nothing,
  // or its headers a byte at a time, is closed after the first-request timeout; one that made a
  // request is kept alive as before.
  it('closes a connection whose first request does not arrive in time, and keeps one that made a request', async () => {
    const port = await listen(4096, 300);
    const open = async (): Promise<{ socket: Socket; closed: Promise<number>; text: () => string }> => {
      const socket = connect(port, '127.0.0.1');
      let text = '';
      socket.on('data', (d: Buffer) => (text += d.toString()));
      const opened = performance.now();
      const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(performance.now() - opened)));
      await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
      return { socket, closed, text: () => text };
    };
    const silent = await open();
    const trickle = await open();
    trickle.socket.write('GET / HTTP/1.1\r\n');
    const drip = setInterval(() => trickle.socket.writable && trickle.socket.write('x'), 50);
    const served = await open();
    served.socket.write(`GET / HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\n\r\n`);
    const after = await Promise.all([silent.closed, trickle.closed]);
    clearInterval(drip);
    for (const ms of after) expect(ms).toBeGreaterThanOrEqual(250);
    expect(silent.text() + trickle.text()).toBe('');
    // The served connection is open past the timeout, and serves its next request.
    await new Promise((r) => setTimeout(r, 300));
    expect(served.socket.destroyed).toBe(false);
    served.socket.write(`GET / HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\n\r\n`);
    await new Promise((r) => setTimeout(r, 100));
    expect(served.text().match(/HTTP\/1\.1 200/g)).toHaveLength(2);
    served.socket.destroy();
  });

  // One client opening sockets and sending nothing filled CODEMODE_MAX_CONNECTIONS for everyone:
  // at most WAITING_PER_ADDRESS (3 here) from one address wait for their first request at once;
  // another address (127.0.0.2, also the loopback interface) is served meanwhile, and so is the
  // first address once one of its connections has made its request.
  it('closes a connection at once past the connections from its address waiting for their first request', async () => {
    const port = await listen(4096, 10_000, 3);
    const opened: Socket[] = [];
    const open = async (from = '127.0.0.1'): Promise<{ socket: Socket; closed: () => boolean; text: () => string }> => {
      const socket = connect({ port, host: '127.0.0.1', localAddress: from });
      opened.push(socket);
      let text = '';
      let closed = false;
      socket.on('data', (d: Buffer) => (text += d.toString()));
      socket.on('close', () => (closed = true));
      socket.on('error', () => undefined);
      await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
      return { socket, closed: () => closed, text: () => text };
    };
    const request = `GET / HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\n\r\n`;
    try {
      const silent = [await open(), await open(), await open()];
      const fourth = await open();
      const elsewhere = await open('127.0.0.2');
      await new Promise((r) => setTimeout(r, 200));
      expect(silent.map((c) => c.closed())).toEqual([false, false, false]);
      expect(fourth.closed()).toBe(true);
      expect(fourth.text()).toBe('');
      elsewhere.socket.write(request);
      // One of the three makes its request: it no longer waits, so a new one is accepted.
      silent[0]?.socket.write(request);
      await new Promise((r) => setTimeout(r, 200));
      expect(elsewhere.text()).toMatch(/^HTTP\/1\.1 200/);
      expect(silent[0]?.text()).toMatch(/^HTTP\/1\.1 200/);
      const fifth = await open();
      fifth.socket.write(request);
      await new Promise((r) => setTimeout(r, 200));
      expect(fifth.text()).toMatch(/^HTTP\/1\.1 200/);
    } finally {
      for (const s of opened) s.destroy();
    }
  });

  it('announces its keep-alive timeout and keeps an idle connection for a call 6 s later', async () => {
    const r = await twoCallsApart(await start(true));
    expect(r.keepAlive).toBe(`timeout=${KEEP_ALIVE_TIMEOUT_MS / 1000}`);
    expect(r.connections).toBe(1);
  }, 20_000);

  it("with Node's defaults the same two calls need two connections (what the setting is for)", async () => {
    const r = await twoCallsApart(await start(false));
    expect(r.keepAlive).toBe('timeout=5');
    expect(r.connections).toBe(2);
  }, 20_000);
});

describe('closeServer', () => {
  it('closes a connection whose client reads its streamed response slowly after the grace, and resolves', async () => {
    // A streamed (SSE) response, as a tool call's: written as its client takes it.
    const app = new Hono().get('/large', () => largeEventStream());
    const server = await new Promise<Server>((resolve) => {
      const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s as Server)) as Server;
    });
    const { port } = server.address() as AddressInfo;
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    await new Promise<void>((resolve) => socket.once('connect', resolve));
    // Never reads: the response stays under way.
    socket.pause();
    socket.write(`GET /large HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\n\r\n`);
    await new Promise((r) => setTimeout(r, 300));
    const started = performance.now();
    const outcome = await Promise.race([closeServer(server, 300).then(() => 'closed'), new Promise((r) => setTimeout(() => r('still open'), 3000))]);
    socket.destroy();
    expect(outcome).toBe('closed');
    expect(performance.now() - started).toBeGreaterThanOrEqual(250);
  });
});
