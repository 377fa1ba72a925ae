// Which kept-alive connections stay open between requests (connection-owners.ts, app.ts). Idle
// kept-alive connections count against CODEMODE_MAX_CONNECTIONS for 65 s each: a user who opened
// thousands and sent one request on each, or anyone sending a probe or a refused request, held
// them and every other user's new connection was refused. Over real sockets, two token users.
import { EventEmitter } from 'node:events';
import { connect, type Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ConnectionOwners, connectionsPerUser } from '../../../src/gateway/connection-owners.js';
import { ALICE, BOB, rawMcpPost, sleep, twoUserGateway, type Gateway } from './harness.js';

describe('ConnectionOwners', () => {
  const socket = (): Socket => new EventEmitter() as unknown as Socket;

  it.each([
    ['a first connection', [['a', 0]], [false], { a: 1 }],
    [
      'three of one user at a share of two',
      [
        ['a', 0],
        ['a', 1],
        ['a', 2],
      ],
      [false, false, true],
      { a: 3 },
    ],
    [
      'a connection asked again by its owner',
      [
        ['a', 0],
        ['a', 0],
        ['a', 0],
      ],
      [false, false, false],
      { a: 1 },
    ],
    [
      'a connection passed from one user to another (a proxy)',
      [
        ['a', 0],
        ['b', 0],
      ],
      [false, false],
      { a: 0, b: 1 },
    ],
    [
      'two users at their share each',
      [
        ['a', 0],
        ['b', 1],
        ['a', 2],
        ['b', 3],
      ],
      [false, false, false, false],
      { a: 2, b: 2 },
    ],
  ] as const)('%s', (_name, claims, over, holding) => {
    const owners = new ConnectionOwners(2);
    const sockets = [socket(), socket(), socket(), socket()];
    expect(claims.map(([user, i]) => owners.claim(sockets[i] as Socket, user))).toEqual(over);
    for (const [user, n] of Object.entries(holding)) expect(owners.holding(user)).toBe(n);
  });

  it("gives a closed connection back to its last owner's share, once", () => {
    const owners = new ConnectionOwners(1);
    const [s1, s2] = [socket(), socket()];
    owners.claim(s1, 'a');
    expect(owners.claim(s2, 'a')).toBe(true);
    s1.emit('close');
    s1.emit('close');
    expect(owners.holding('a')).toBe(1);
    expect(owners.claim(s2, 'a')).toBe(false);
  });

  it('counts nothing for a connection destroyed before the claim (its close already fired)', () => {
    const owners = new ConnectionOwners(1);
    const gone = Object.assign(socket(), { destroyed: true });
    expect(owners.claim(gone, 'a')).toBe(false);
    expect(owners.holding('a')).toBe(0);
    expect(gone.listenerCount('close')).toBe(0);
  });

  it('gives back a connection claimed while open and destroyed before its next claim, once', () => {
    const owners = new ConnectionOwners(1);
    const s1 = socket();
    owners.claim(s1, 'a');
    Object.assign(s1, { destroyed: true });
    expect(owners.claim(s1, 'b')).toBe(false);
    s1.emit('close');
    expect([owners.holding('a'), owners.holding('b')]).toEqual([0, 0]);
  });

  it.each([
    [4096, 256],
    [100, 6],
    [8, 1],
    [1, 1],
  ])('CODEMODE_MAX_CONNECTIONS=%i: a user keeps %i open (a sixteenth, at least one)', (max, share) => {
    expect(connectionsPerUser(max)).toBe(share);
  });
});

describe('kept-alive connections over HTTP', () => {
  let gateway: Gateway;
  const sockets: Socket[] = [];
  beforeAll(async () => {
    gateway = await twoUserGateway({ connectionsPerUser: 2 });
  });
  afterEach(async () => {
    for (const s of sockets.splice(0)) s.destroy();
    await sleep(100);
  });
  afterAll(async () => {
    await gateway.close();
  });

  interface Answered {
    socket: Socket;
    /** The response's status line and headers. */
    head: string;
    closed: () => boolean;
  }

  /** One POST /mcp (tools/list) on a connection of its own; resolves with its response's head. */
  async function request(headers: Record<string, string>): Promise<Answered> {
    const socket = connect(gateway.port, '127.0.0.1');
    sockets.push(socket);
    let text = '';
    let closed = false;
    socket.on('data', (d: Buffer) => (text += d.toString()));
    socket.on('close', () => (closed = true));
    socket.on('error', () => undefined);
    await new Promise<void>((resolve) => socket.once('connect', resolve));
    const body = '{"jsonrpc":"2.0","id":1,"method":"tools/list"}';
    const all = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-06-18',
      host: `127.0.0.1:${gateway.port}`,
      'content-length': String(body.length),
      ...headers,
    };
    const head = Object.entries(all)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    socket.write(`POST /mcp HTTP/1.1\r\n${head}\r\n${body}`);
    const deadline = performance.now() + 5_000;
    while (!text.includes('\r\n\r\n') && performance.now() < deadline) await sleep(10);
    return { socket, head: text.slice(0, text.indexOf('\r\n\r\n')), closed: () => closed };
  }
  const as = (token: string): Promise<Answered> => request({ authorization: `Bearer ${token}` });
  const closes = (a: Answered): boolean => /\r\nconnection: close/i.test(a.head);

  it("keeps a user's connections open up to their share, then closes the next after its response; other users keep theirs", async () => {
    const alice = [await as(ALICE), await as(ALICE), await as(ALICE)];
    const bob = await as(BOB);
    expect(alice.map((a) => a.head.split('\r\n')[0])).toEqual(Array(3).fill('HTTP/1.1 200 OK'));
    expect(alice.map(closes)).toEqual([false, false, true]);
    expect(closes(bob)).toBe(false);
    await sleep(100);
    expect(alice.map((a) => a.closed())).toEqual([false, false, true]);
    // One of hers closes: a new one is kept again.
    alice[0]?.socket.destroy();
    await sleep(100);
    expect(closes(await as(ALICE))).toBe(false);
  });

  it('does not count the connections of clients that went away before their answer', async () => {
    // Each sends half its body and leaves: the answer comes after the connection closed, so its
    // 'close' has fired already and must not be waited for to give the connection back.
    for (let i = 0; i < 3; i++) {
      const gone = await rawMcpPost(gateway.port, '{"jsonrpc":"2.0",', { token: ALICE, contentLength: 100 });
      await sleep(50);
      gone.destroy();
      await sleep(50);
    }
    await sleep(100);
    const next = await as(ALICE);
    expect(next.head.split('\r\n')[0]).toBe('HTTP/1.1 200 OK');
    expect(closes(next)).toBe(false);
  });

  it.each([
    ['a wrong Host header', { authorization: `Bearer ${ALICE}`, host: 'evil.example:80' }, 403],
    ['no token', {}, 401],
    ['an unknown token', { authorization: 'Bearer tok-nobody-xxxxxxxxxxxxxxxx' }, 401],
  ])('closes the connection of a request refused with %s (no user to hold it)', async (_name, headers, status) => {
    const refused = await request(headers);
    expect(refused.head.split('\r\n')[0]).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
    expect(closes(refused)).toBe(true);
  });
});
