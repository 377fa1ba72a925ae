// What one caller's request bodies may cost the replica every caller shares: a body of too many
// JSON values is refused before it is parsed (json-shape.ts: 500,000 members in _meta held the
// event loop 3.5 s), and the bytes of bodies in flight are bounded per user and per replica
// (body-budget.ts: 40 bodies left one byte short of their 8 MiB held 320 MiB). Over real HTTP with
// two token users, like the other gateway tests.
import { connect, type Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BodyBudget } from '../../../src/gateway/body-budget.js';
import { bytesDue } from '../../../src/gateway/body-progress.js';
import { MAX_JSON_DEPTH, MAX_JSON_VALUES, jsonShapeProblem } from '../../../src/gateway/json-shape.js';
import { ALICE, BOB, sleep, twoUserGateway, type Gateway } from './harness.js';

const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' };

const members = (n: number): string => `{${Array.from({ length: n }, (_, i) => `"k${i}":1`).join(',')}}`;
const call = (code: string, meta = '{}'): string =>
  `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":${JSON.stringify(code)}},"_meta":${meta}}}`;
/** A call whose body is about `bytes` long (the rest in _meta). */
const padded = (code: string, bytes: number): string => call(code, JSON.stringify({ pad: 'z'.repeat(bytes) }));

describe('jsonShapeProblem', () => {
  const limits = { maxValues: 4, maxDepth: 2 };
  it.each([
    ['an empty object', '{}', undefined],
    ['four values', '{"a":1,"b":[1,2]}', undefined],
    ['five values', '{"a":1,"b":[1,2,3]}', { kind: 'values', max: 4 }],
    ['separators and brackets inside strings do not count', '{"a":"[[[,,,{{{"}', undefined],
    ['an escaped quote does not end a string', '{"a":"\\"[[[,,,"}', undefined],
    ['an escaped backslash before a quote does', '{"a":"\\\\","b":[[[1]]]}', { kind: 'depth', max: 2 }],
    ['depth two', '[[1]]', undefined],
    ['depth three', '[[[1]]]', { kind: 'depth', max: 2 }],
    ['an unterminated string is left to JSON.parse', '{"a":"[[[[[', undefined],
    ['text that is not JSON is left to JSON.parse', 'not json', undefined],
  ])('%s', (_name, text, problem) => {
    expect(jsonShapeProblem(text, limits)).toEqual(problem);
  });

  it.each([
    ['object members', members(1_000_000), 'values'],
    ['array items', `[${'1,'.repeat(4_000_000)}1]`, 'values'],
    ['nesting', `${'['.repeat(4_000_000)}${']'.repeat(4_000_000)}`, 'depth'],
  ])('refuses a body over a limit whatever its size: %s', (_name, text, kind) => {
    expect(jsonShapeProblem(text)?.kind).toBe(kind);
  });

  it('passes the largest calls, whose size is in strings', () => {
    expect(jsonShapeProblem(call('print("\\\\")\n'.repeat(20_000)))).toBeUndefined();
    expect(jsonShapeProblem(JSON.stringify({ content: '"'.repeat(1_000_000) }))).toBeUndefined();
  });
});

describe('BodyBudget', () => {
  it.each([
    ['within both', [['a', 10]], 'a', 10, undefined],
    ["over the user's share", [['a', 25]], 'a', 10, 'user'],
    ["another user's share is their own", [['a', 30]], 'b', 30, undefined],
    [
      'over the total',
      [
        ['a', 30],
        ['b', 30],
      ],
      'c',
      10,
      'total',
    ],
  ] as const)('%s', (_name, before, user, bytes, refused) => {
    const budget = new BodyBudget({ perUserBytes: 30, totalBytes: 64 });
    for (const [u, b] of before) expect(budget.hold(u).take(b)).toBeUndefined();
    expect(budget.hold(user).take(bytes)).toBe(refused);
  });

  it('gives back what a request took, once, and counts nothing taken after that', () => {
    const budget = new BodyBudget({ perUserBytes: 30, totalBytes: 64 });
    const hold = budget.hold('a');
    hold.take(10);
    hold.take(5);
    expect([budget.held(), budget.held('a')]).toEqual([15, 15]);
    hold.release();
    hold.release();
    hold.take(7);
    expect([budget.held(), budget.held('a')]).toEqual([0, 0]);
  });
});

describe('request bounds over HTTP', () => {
  let gateway: Gateway;
  const sockets: Socket[] = [];
  const budget = { perUserBytes: 6 * 1024 * 1024, totalBytes: 10 * 1024 * 1024 };
  const rejections: string[] = [];

  beforeAll(async () => {
    gateway = await twoUserGateway({ bodyBudget: budget, onAdmissionRejected: (limit) => void rejections.push(limit) });
  });
  afterEach(async () => {
    for (const s of sockets.splice(0)) s.destroy();
    // The server sees the close a moment later, and gives the bodies' bytes back then.
    await sleep(100);
  });
  afterAll(async () => {
    await gateway.close();
  });

  const post = (token: string, body: string): Promise<Response> =>
    fetch(gateway.url, { method: 'POST', headers: { ...HEADERS, authorization: `Bearer ${token}` }, body });

  /** A request whose body stops `missing` bytes short of its declared length, held open. */
  async function slowBody(token: string, length: number, missing = 1): Promise<Socket> {
    const socket = connect(gateway.port, '127.0.0.1');
    sockets.push(socket);
    socket.on('error', () => undefined);
    await new Promise<void>((resolve) => socket.once('connect', resolve));
    const head = Object.entries({ ...HEADERS, host: `127.0.0.1:${gateway.port}`, authorization: `Bearer ${token}`, 'content-length': String(length) })
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    socket.write(`POST /mcp HTTP/1.1\r\n${head}\r\n`);
    socket.write(Buffer.alloc(length - missing, 0x20));
    return socket;
  }

  it.each([
    ['500,000 members in _meta', call('print(1)', members(500_000)), /more than 2048 JSON values/],
    ['500,000 unknown arguments', call('print(1)').replace('"arguments":{', `"arguments":${members(500_000).slice(0, -1)},`), /more than 2048 JSON values/],
    ['objects nested 100,000 deep', call('print(1)', `${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}`), /more than 64 levels deep/],
  ])('refuses %s before parsing it, quickly; nothing runs', async (_name, body, message) => {
    const before = gateway.service.calls.length;
    const res = await post(ALICE, body);
    expect(res.status).toBe(400);
    const answer = (await res.json()) as { error: { code: number; message: string } };
    expect(answer.error.code).toBe(-32600);
    expect(answer.error.message).toMatch(message);
    expect(gateway.service.calls.length).toBe(before);
  });

  it(`serves a call of ${MAX_JSON_VALUES / 2} members in _meta and ${MAX_JSON_DEPTH / 2} levels of nesting`, async () => {
    const meta = `{"a":${members(MAX_JSON_VALUES / 2)},"b":${'['.repeat(MAX_JSON_DEPTH / 2)}${']'.repeat(MAX_JSON_DEPTH / 2)}}`;
    const res = await post(ALICE, call('print(2)', meta));
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('print(2)');
  });

  it("refuses a user's request once their bodies in flight hold their share, serves other users, and frees the share when those requests end", async () => {
    const held = [await slowBody(ALICE, 3_000_000), await slowBody(ALICE, 3_000_000)];
    await sleep(200);
    const refused = await post(ALICE, padded('print(3)', 300_000));
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('5');
    expect(((await refused.json()) as { error: { message: string } }).error.message).toMatch(/already hold 6 MiB, the most one user may/);
    expect(rejections.at(-1)).toBe('user_request_bytes');

    const other = await post(BOB, call('print(4)'));
    expect(other.status).toBe(200);
    expect(await other.text()).toContain('print(4)');

    for (const s of held) s.destroy();
    await sleep(200);
    const again = await post(ALICE, call('print(5)'));
    expect(again.status).toBe(200);
    expect(await again.text()).toContain('print(5)');
  });

  // A body over RESERVED_AHEAD_MAX_BYTES is counted as it arrives: declaring 3 MB and sending
  // (almost) nothing held 3 MB of the user's share for the request timeout.
  it('counts a long body that arrives slowly by what has arrived, not by its declared length', async () => {
    const held = [await slowBody(ALICE, 3_000_000, 2_999_000), await slowBody(ALICE, 3_000_000, 2_999_000)];
    await sleep(200);
    const served = await post(ALICE, padded('print(9)', 300_000));
    expect(served.status).toBe(200);
    expect(await served.text()).toContain('print(9)');
    for (const s of held) s.destroy();
  });

  it('refuses everyone with 503 while the replica holds its total, and never more', async () => {
    await slowBody(ALICE, 6_000_000);
    await slowBody(BOB, 4_000_000);
    await sleep(200);
    const res = await post(BOB, padded('print(6)', 500_000));
    expect(res.status).toBe(503);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/holding 10 MiB of request bodies/);
    expect(rejections.at(-1)).toBe('request_bytes');
  });

  it('counts a call until its response has ended, not only while its body arrives', async () => {
    let finish = (): void => undefined;
    gateway.service.behaviour = async (request) => {
      await new Promise<void>((resolve) => (finish = resolve));
      return {
        runName: 'r',
        namespace: 'codemode',
        phase: 'Succeeded',
        exitCode: 0,
        stdout: request.code,
        stderr: '',
        truncated: false,
        stdoutBytes: 0,
        stderrBytes: 0,
      };
    };
    const running = post(ALICE, padded('print(7)', 4_000_000));
    await sleep(200);
    expect(gateway.service.calls.at(-1)?.request.code).toBe('print(7)');
    const refused = await post(ALICE, padded('print(8)', 3_000_000));
    expect(refused.status).toBe(429);
    finish();
    await (await running).text();
    await sleep(100);
    expect((await post(ALICE, padded('print(8)', 3_000_000))).status).toBe(200);
  });
});

// A body's bytes are held from their arrival (body budget), and Node bounds a stalled body only by
// its 5-minute request timeout: a body must bring, in every window, 1/32 of what it has brought
// (body-progress.ts). A 1 s window here: the steady senders below send ten times in each, so a
// test process held up a while under load does not look like a stalled client.
describe('request bodies that stop arriving', () => {
  const WINDOW_MS = 1_000;
  let gateway: Gateway;
  const sockets: Socket[] = [];
  const rejections: string[] = [];

  beforeAll(async () => {
    gateway = await twoUserGateway({
      bodyBudget: { perUserBytes: 6 * 1024 * 1024, totalBytes: 10 * 1024 * 1024 },
      bodyProgressWindowMs: WINDOW_MS,
      onAdmissionRejected: (limit) => void rejections.push(limit),
    });
  });
  afterEach(async () => {
    for (const s of sockets.splice(0)) s.destroy();
    await sleep(100);
  });
  afterAll(async () => {
    await gateway.close();
  });

  interface Sent {
    /** Everything the server answered so far. */
    text(): string;
    /** Resolves with the ms from the request's start when the server closed the connection. */
    closed: Promise<number>;
    /** Stops sending. */
    stop(): void;
  }

  /**
   * POSTs `body` (declared whole) on a socket of its own: `first` bytes at once, then `step` bytes
   * every `everyMs`, never past `sendAtMost` bytes.
   */
  async function send(body: string, first: number, step: number, everyMs: number, sendAtMost = body.length): Promise<Sent> {
    const socket = connect(gateway.port, '127.0.0.1');
    sockets.push(socket);
    let text = '';
    socket.on('data', (d: Buffer) => (text += d.toString()));
    socket.on('error', () => undefined);
    await new Promise<void>((resolve) => socket.once('connect', resolve));
    const started = performance.now();
    const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(performance.now() - started)));
    const head = Object.entries({ ...HEADERS, host: `127.0.0.1:${gateway.port}`, authorization: `Bearer ${ALICE}`, 'content-length': String(body.length) })
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    socket.write(`POST /mcp HTTP/1.1\r\n${head}\r\n${body.slice(0, first)}`);
    let at = first;
    const timer = setInterval(() => {
      const end = Math.min(at + step, sendAtMost);
      if (end > at && socket.writable) socket.write(body.slice(at, end));
      at = end;
    }, everyMs);
    void closed.then(() => clearInterval(timer));
    return { text: () => text, closed, stop: () => clearInterval(timer) };
  }

  it.each([
    ['a long body (counted as it arrives) that stops after a fast start', padded('print(20)', 3_000_000), 2_999_000, 0],
    ['a long body that drips a byte at a time after a fast start', padded('print(21)', 3_000_000), 2_000_000, 1],
    ['a short body (taken whole) that stops half way', padded('print(22)', 20_000), 10_000, 0],
  ])('answers 408 to %s, closes its connection and runs nothing', async (_name, body, first, drip) => {
    const before = gateway.service.calls.length;
    const sent = await send(body, first, drip, 50, body.length - 1);
    const closedAfterMs = await sent.closed;
    expect(closedAfterMs).toBeGreaterThanOrEqual(WINDOW_MS - 50);
    expect(sent.text()).toMatch(/^HTTP\/1\.1 408 /);
    expect(sent.text()).toMatch(/connection: close/i);
    expect(sent.text()).toMatch(/body stopped arriving .* Send the request again/);
    expect(gateway.service.calls.length).toBe(before);
    expect(rejections).not.toContain('body_progress');
  });

  it('gives back what a stalled body held: the user is served again', async () => {
    const stalled = [await send(padded('print(23)', 3_000_000), 2_999_999, 0, 50), await send(padded('print(24)', 3_000_000), 2_999_999, 0, 50)];
    await sleep(100);
    // The user's share (6 MiB) is held now ...
    const refused = await fetch(gateway.url, { method: 'POST', headers: { ...HEADERS, authorization: `Bearer ${ALICE}` }, body: padded('print(25)', 300_000) });
    expect(refused.status).toBe(429);
    await refused.text();
    // ... and free once the stalled bodies were answered.
    await Promise.all(stalled.map((s) => s.closed));
    await sleep(100);
    const served = await fetch(gateway.url, { method: 'POST', headers: { ...HEADERS, authorization: `Bearer ${ALICE}` }, body: padded('print(26)', 300_000) });
    expect(served.status).toBe(200);
    expect(await served.text()).toContain('print(26)');
  });

  it.each([
    ['a long body', padded('print(27)', 600_000), 20_000],
    ['a short body', padded('print(28)', 20_000), 600],
  ])('serves %s sent slowly at a steady rate over several windows', async (_name, body, step) => {
    const sent = await send(body, step, step, 100);
    const deadline = performance.now() + 15_000;
    while (!/print\(2[78]\)/.test(sent.text().split('\r\n\r\n').slice(1).join('')) && performance.now() < deadline) await sleep(50);
    sent.stop();
    expect(sent.text()).toMatch(/^HTTP\/1\.1 200 /);
    // It took more than three windows, and its connection stays open for the next request.
    expect(body.length / step).toBeGreaterThan(2.5 * (WINDOW_MS / 100));
    expect(sockets.at(-1)?.destroyed).toBe(false);
  });
});

describe('bytesDue', () => {
  it.each([
    [0, 1],
    [31, 1],
    [64, 2],
    [32 * 1024 * 1024, 1024 * 1024],
  ])('after %i bytes a window must bring %i', (received, due) => {
    expect(bytesDue(received)).toBe(due);
  });
});
