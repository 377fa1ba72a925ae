// What one user's execute_code results may hold of the replica while they are sent: a client that
// reads its results slowly is never cut (stall-guard.ts), and a run's slot is freed when it ends, so
// results with images, read slowly or finishing many at once, piled up in the replica's memory until
// it ended, with every other user's calls. A result's images are taken from its user's share of the
// body budget (body-budget.ts) before its reply is made, and one without room is left out with a
// note (result-hold.ts); its texts and progress notifications count too until sent. Over real HTTP
// with two token users.
import type { Socket } from 'node:net';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TOKENS_KEY, TokensAuthenticator } from '../../../src/auth/tokens.js';
import type { ServerContext } from '@modelcontextprotocol/server';
import type { DisplayItem } from '../../../src/exec/display.js';
import { BodyBudget, keepHold } from '../../../src/gateway/body-budget.js';
import { holdResult, replyBytes } from '../../../src/gateway/tools/result-hold.js';
import { progressReporter } from '../../../src/gateway/tools/progress.js';
import type { OutputChunk } from '../../../src/runs/types.js';
import { TEST_OPTIONS, outcome, rawMcpPost, sleep, startGateway, type Gateway } from './harness.js';

const ALICE = 'tok-alice-aaaaaaaaaaaaaaaa';
const BOB = 'tok-bob-bbbbbbbbbbbbbbbbbbbb';
const MiB = 1024 * 1024;
const image = Buffer.alloc(4 * MiB, 7).toString('base64');
const call = (code: string): string => JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'execute_code', arguments: { code } } });

describe('replyBytes', () => {
  it.each([
    ['texts count twice (text and structuredContent)', outcome({ stdout: 'ab', stderr: 'c', result: 'd' }), 8],
    [
      'images count once, and display texts',
      outcome({
        display: [
          { kind: 'image', mime: 'image/png', data: 'x'.repeat(100), bytes: 75 },
          { kind: 'text', format: 'html', text: 'yy' },
        ],
      }),
      102,
    ],
  ])('%s', (_n, o, bytes) => {
    expect(replyBytes(o)).toBe(bytes);
  });
});

describe('holdResult', () => {
  const img = (n: number): DisplayItem => ({ kind: 'image', mime: 'image/png', data: 'x'.repeat(n), bytes: (n * 3) / 4 });
  const shown = outcome({ stdout: 'ab', display: [img(40), { kind: 'text', format: 'html', text: 'hh' }, img(40)] });
  it.each<[string, [string, number][], string[], number]>([
    ['room for both images: the result is sent whole', [], ['image', 'text', 'image'], 4 + 2 + 80],
    ['room for one: the second is a note', [['alice', 40]], ['image', 'text', 'note:user'], 40 + 4 + 2 + 40],
    ["the user's share is full: notes that say so", [['alice', 94]], ['note:user', 'text', 'note:user'], 94 + 4 + 2],
    ["the replica's total is full: notes that say so", [['bob', 100]], ['note:total', 'text', 'note:total'], 4 + 2],
  ])('%s', (_name, before, kinds, aliceHolds) => {
    const budget = new BodyBudget({ perUserBytes: 100, totalBytes: 140 });
    for (const [user, bytes] of before) budget.hold(user).add(bytes);
    const sent = holdResult(shown, budget.hold('alice'));
    const kind = (d: DisplayItem): string =>
      d.kind === 'image'
        ? 'image'
        : d.format !== 'note'
          ? 'text'
          : /one user may/.test(d.text)
            ? 'note:user'
            : /its limit/.test(d.text)
              ? 'note:total'
              : d.format;
    expect(sent.display?.map(kind)).toEqual(kinds);
    expect(budget.held('alice')).toBe(aliceHolds);
    expect(sent.stdout).toBe('ab');
  });
});

describe('progress notifications count against the hold of their request as they are sent', () => {
  it.each<[string, OutputChunk[], number, string?]>([
    ['one stdout chunk: its text, a notification envelope (64) and the token', [{ stream: 'stdout', text: 'a'.repeat(1000) }], 64 + 1 + 1000],
    [
      'both streams: one notification each',
      [
        { stream: 'stdout', text: 'a'.repeat(1000) },
        { stream: 'stderr', text: 'b'.repeat(500) },
      ],
      64 + 1 + 1000 + 64 + 1 + 'stderr: '.length + 500,
    ],
    ['a token of 200 characters: repeated in each', [{ stream: 'stdout', text: 'a'.repeat(1000) }], 64 + 200 + 1000, 'p'.repeat(200)],
  ])('%s', async (_n, chunks, held, progressToken = 't') => {
    const budget = new BodyBudget({ perUserBytes: MiB, totalBytes: MiB });
    const req = new Request('http://127.0.0.1/mcp');
    keepHold(req, budget.hold('alice'));
    const ctx = { mcpReq: { _meta: { progressToken }, notify: async () => undefined }, http: { req } } as unknown as ServerContext;
    const reporter = progressReporter(ctx, { ...TEST_OPTIONS, progressHeartbeatSeconds: 0 }, pino({ level: 'silent' }));
    for (const c of chunks) reporter?.push(c);
    await reporter?.close();
    expect(budget.held('alice')).toBe(held);
  });
});

describe('results held while they are sent, over HTTP', () => {
  let gateway: Gateway;
  const rejections: string[] = [];

  beforeAll(async () => {
    const tokens = new TokensAuthenticator(pino({ level: 'silent' }));
    tokens.load({ data: { [TOKENS_KEY]: Buffer.from(`${ALICE},alice,1\n${BOB},bob,2\n`).toString('base64') } });
    gateway = await startGateway(
      {},
      { authenticator: tokens },
      { bodyBudget: { perUserBytes: 20 * MiB, totalBytes: 64 * MiB }, onAdmissionRejected: (limit) => void rejections.push(limit) },
    );
    gateway.setReady(true);
    // Three 4 MiB images: a 16 MiB result, more than the sockets' buffers take at once.
    gateway.service.behaviour = async (req) =>
      outcome(
        req.code === 'show()'
          ? { display: [1, 2, 3].map(() => ({ kind: 'image' as const, mime: 'image/png', data: image, bytes: 4 * MiB })) }
          : { stdout: 'ok' },
      );
  });
  afterAll(async () => {
    await gateway.close();
  });

  /** Alice's call whose result she does not read (yet): the connection stays open, paused. */
  async function unreadResult(): Promise<Socket> {
    const socket = await rawMcpPost(gateway.port, call('show()'), { token: ALICE, paused: true });
    await sleep(300);
    return socket;
  }

  const post = (token: string, code: string): Promise<Response> =>
    fetch(gateway.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-06-18',
        authorization: `Bearer ${token}`,
      },
      body: call(code),
    });

  /** The content types of a result's reply, images and the notes that replaced them. */
  async function shown(res: Response): Promise<string[]> {
    expect(res.status).toBe(200);
    const text = await res.text();
    const json = text.startsWith('{') ? text : (text.split('\n').find((l) => l.startsWith('data: {"result"')) ?? '').slice(6);
    const result = (JSON.parse(json) as { result: { content: Array<{ type: string; text?: string }> } }).result;
    return result.content
      .filter((c) => c.type === 'image' || /\[note\]/.test(c.text ?? ''))
      .map((c) => (c.type === 'image' ? 'image' : /the most one user may/.test(c.text ?? '') ? 'note: user share' : 'note'));
  }

  it.each([
    [
      "the same user's next result, while one is unsent: its images are left out, with a note",
      ALICE,
      ['note: user share', 'note: user share', 'note: user share'],
    ],
    ["another user's is sent whole", BOB, ['image', 'image', 'image']],
  ])('%s', async (_n, token, kinds) => {
    rejections.length = 0;
    const socket = await unreadResult();
    try {
      // A request without images is served: the unread result holds no more than its images.
      const small = await post(token, 'print(1)');
      expect(small.status).toBe(200);
      await small.text();
      expect(await shown(await post(token, 'show()'))).toEqual(kinds);
      expect(rejections).toEqual([]);
    } finally {
      socket.destroy();
    }
    // Once the result's connection has ended, what it held is given back.
    await sleep(100);
    expect(await shown(await post(ALICE, 'show()'))).toEqual(['image', 'image', 'image']);
  });
});
