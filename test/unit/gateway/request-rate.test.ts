// Requests to /mcp per user and replica (src/gateway/request-rate.ts, CODEMODE_USER_REQUESTS_PER_SECOND):
// past a burst and a rate a user's request is answered 429 before its body is read, counted as
// user_requests; other users are served. Over real HTTP with two token users.
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { TOKENS_KEY, TokensAuthenticator } from '../../../src/auth/tokens.js';
import { MIN_REQUEST_BURST, RequestRate } from '../../../src/gateway/request-rate.js';
import { INITIALIZE_BODY, MCP_POST_HEADERS, rawRequest, startGateway, type Gateway } from './harness.js';

const ALICE = 'tok-alice-aaaaaaaaaaaaaaaa';
const BOB = 'tok-bob-bbbbbbbbbbbbbbbbbbbb';

describe('RequestRate', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it.each<[string, number, number, number, number]>([
    // [name, perSecond, requests back to back, ms between them, admitted]
    ['a low rate still has the smallest burst', 1, 30, 0, MIN_REQUEST_BURST],
    ['a burst of twice the rate', 20, 100, 0, 40],
    ['the rate after the burst', 20, 100, 10, 40 + 19],
    ['a client within the rate is never refused', 20, 100, 50, 100],
  ])('%s', (_name, perSecond, n, everyMs, admitted) => {
    vi.useFakeTimers({ toFake: ['performance', 'Date'] });
    const rate = new RequestRate(perSecond);
    let ok = 0;
    for (let i = 0; i < n; i++) {
      if (rate.admit('alice') === undefined) ok++;
      vi.advanceTimersByTime(everyMs);
    }
    expect(ok).toBe(admitted);
  });

  it('answers a refused request with 429, Retry-After and a JSON-RPC error that says what to do', async () => {
    vi.useFakeTimers({ toFake: ['performance', 'Date'] });
    const rate = new RequestRate(2);
    for (let i = 0; i < MIN_REQUEST_BURST; i++) expect(rate.admit('alice')).toBeUndefined();
    const refused = rate.admit('alice');
    expect(refused?.status).toBe(429);
    expect(refused?.headers.get('retry-after')).toBe('1');
    const body = (await refused?.json()) as { error: { message: string; data: unknown } };
    expect(body.error.message).toMatch(/more than 2 a second to this gateway replica .*CODEMODE_USER_REQUESTS_PER_SECOND.*Nothing in this request was run/);
    expect(body.error.data).toEqual({ limit: 'user_requests', perSecond: 2 });
    expect(rate.admit('bob')).toBeUndefined();
  });
});

describe('requests per user over HTTP', () => {
  let gateway: Gateway;
  const rejected: string[] = [];
  beforeAll(async () => {
    const tokens = new TokensAuthenticator(pino({ level: 'silent' }));
    tokens.load({ data: { [TOKENS_KEY]: Buffer.from(`${ALICE},alice,1\n${BOB},bob,2\n`).toString('base64') } });
    gateway = await startGateway({ userRequestsPerSecond: 1 }, { authenticator: tokens }, { onAdmissionRejected: (limit) => void rejected.push(limit) });
  });
  afterAll(async () => {
    await gateway.close();
  });

  const post = (token: string) =>
    rawRequest(gateway.port, '/mcp', {
      method: 'POST',
      headers: { ...MCP_POST_HEADERS, host: `127.0.0.1:${gateway.port}`, authorization: `Bearer ${token}` },
      body: INITIALIZE_BODY,
    });

  it("refuses a user's requests past the burst and serves another user's", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < MIN_REQUEST_BURST + 3; i++) statuses.push((await post(ALICE)).status);
    expect(statuses.slice(0, MIN_REQUEST_BURST).every((s) => s === 200)).toBe(true);
    expect(statuses.slice(MIN_REQUEST_BURST)).toEqual([429, 429, 429]);
    expect(rejected).toEqual(['user_requests', 'user_requests', 'user_requests']);
    expect((await post(BOB)).status).toBe(200);
  });
});
