// Open subscriptions/listen streams per user (src/gateway/listen-limit.ts): the SDK's 1,024 per
// replica are shared by every caller, and one user's client could take them all. Over real HTTP
// with the official client and two token users, like the other gateway tests.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TOKENS_KEY, TokensAuthenticator } from '../../../src/auth/tokens.js';
import { ListenLimit, MAX_LISTENS_PER_USER, listenId } from '../../../src/gateway/listen-limit.js';
import { startGateway, type Gateway } from './harness.js';

const ALICE = 'tok-alice-aaaaaaaaaaaaaaaa';
const BOB = 'tok-bob-bbbbbbbbbbbbbbbbbbbb';

describe('ListenLimit', () => {
  it('gives each user their own places, and each place back once', () => {
    const limit = new ListenLimit(2);
    const a1 = limit.take('alice');
    const a2 = limit.take('alice');
    expect(limit.take('alice')).toBeUndefined();
    expect(limit.take('bob')).toBeDefined();
    a1?.();
    a1?.();
    expect(limit.take('alice')).toBeDefined();
    expect(limit.take('alice')).toBeUndefined();
    a2?.();
    expect(limit.take('alice')).toBeDefined();
  });

  it.each([
    [{ jsonrpc: '2.0', id: 7, method: 'subscriptions/listen', params: {} }, 7],
    [{ jsonrpc: '2.0', id: 'x', method: 'subscriptions/listen' }, 'x'],
    [{ jsonrpc: '2.0', method: 'subscriptions/listen' }, null],
    [{ jsonrpc: '2.0', id: 1, method: 'tools/list' }, undefined],
    [[{ jsonrpc: '2.0', id: 1, method: 'subscriptions/listen' }], undefined],
    ['subscriptions/listen', undefined],
    [undefined, undefined],
  ])('listenId(%j) is %j', (body, id) => {
    expect(listenId(body)).toBe(id);
  });
});

describe('subscriptions/listen over HTTP', () => {
  let gateway: Gateway;
  beforeAll(async () => {
    const tokens = new TokensAuthenticator(pino({ level: 'silent' }));
    tokens.load({ data: { [TOKENS_KEY]: Buffer.from(`${ALICE},alice,1\n${BOB},bob,2\n`).toString('base64') } });
    gateway = await startGateway({}, { authenticator: tokens });
  });
  afterAll(async () => {
    await gateway.close();
  });

  async function client(token: string): Promise<Client> {
    const c = new Client({ name: 'listen-test', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
    await c.connect(new StreamableHTTPClientTransport(new URL(gateway.url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
    return c;
  }

  it("refuses a user's listen past their places, serves other users, and frees a place when a stream ends", async () => {
    const alice = await client(ALICE);
    const bob = await client(BOB);
    const open = [];
    for (let i = 0; i < MAX_LISTENS_PER_USER; i++) open.push(await alice.listen({ toolsListChanged: true }));
    await expect(alice.listen({ toolsListChanged: true })).rejects.toThrow(/Too many open subscriptions/);
    const theirs = await bob.listen({ toolsListChanged: true });
    await open.pop()?.close();
    await new Promise((r) => setTimeout(r, 100));
    open.push(await alice.listen({ toolsListChanged: true }));
    for (const s of [...open, theirs]) await s.close();
    await alice.close();
    await bob.close();
  });
});

describe('subscriptions/listen at shutdown', () => {
  // A listen stays open as long as its client likes, and Node's server.close() waits for every
  // connection with a response under way: one open listen kept a stopping replica up for its
  // whole grace period (455 s) and made it exit 1. The shutdown signal ends them.
  let gateway: Gateway;
  const shutdown = new AbortController();
  beforeAll(async () => {
    gateway = await startGateway({}, undefined, { shutdown: shutdown.signal });
  });
  afterAll(async () => {
    await gateway.close();
  });

  async function client(): Promise<Client> {
    const c = new Client({ name: 'listen-test', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
    await c.connect(new StreamableHTTPClientTransport(new URL(gateway.url)));
    return c;
  }

  const within = <T>(p: Promise<T>, ms: number): Promise<T | 'still open'> =>
    Promise.race([p, new Promise<'still open'>((r) => setTimeout(() => r('still open'), ms))]);

  it('ends open listens when shutdown begins, and a listen opened later after its acknowledgement', async () => {
    const c = await client();
    const open = await c.listen({ toolsListChanged: true });
    expect(await within(open.closed, 300)).toBe('still open');
    shutdown.abort();
    // 'remote': ended without a graceful response, so the client listens again (through the
    // Service, on a replica that stays).
    expect(await within(open.closed, 2000)).toBe('remote');
    const late = await c.listen({ toolsListChanged: true });
    expect(await within(late.closed, 2000)).toBe('remote');
    await c.close();
  });
});
