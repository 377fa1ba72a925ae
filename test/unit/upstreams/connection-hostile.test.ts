// What a hostile upstream can make the gateway's client connection (src/upstreams/connection.ts)
// run, hold or send: each case plays one against a real client over HTTP on 127.0.0.1, and
// asserts by counting what reached the upstream or came back, never by timing.
import type { ServerResponse } from 'node:http';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { SERVER_REQUESTS_IN_FLIGHT, SERVER_REQUESTS_PER_SECOND } from '../../../src/upstreams/client-limits.js';
import { EVENTS_BURST, EVENTS_PER_SECOND } from '../../../src/upstreams/bounded-fetch.js';
import { UpstreamConnection } from '../../../src/upstreams/connection.js';
import { connect, event, result, sleep, startUpstream, until, type Upstream } from './hostile-upstream.js';

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const done of cleanup.splice(0).reverse()) await done();
});

async function upstream(hooks: Parameters<typeof startUpstream>[0]): Promise<Upstream> {
  const up = await startUpstream(hooks);
  cleanup.push(() => up.close());
  return up;
}

async function ready(url: string, headers: Record<string, string> = {}): Promise<ReturnType<typeof connect>> {
  const c = connect(url, headers);
  cleanup.push(() => c.conn.stop());
  await until(() => c.conn.state.ready);
  return c;
}

/** An event stream the test writes to (the GET the client keeps open). */
function stream(): { get: (_req: unknown, res: ServerResponse) => void; write: (s: string) => void; opened: () => boolean } {
  let res: ServerResponse | undefined;
  return {
    get: (_req, r) => {
      r.writeHead(200, { 'content-type': 'text/event-stream' });
      r.flushHeaders();
      res = r;
    },
    write: (s) => void res?.write(s),
    opened: () => res !== undefined,
  };
}

describe('results are not checked against the upstream’s output schema', () => {
  // The SDK compiled every listed tool's outputSchema (Ajv, on the gateway thread) and ran it on
  // each result, `pattern` regexes included: a ReDoS-prone one held the event loop for seconds.
  it.each<[string, object, object]>([
    ['a pattern the result does not match', { type: 'object', properties: { email: { type: 'string', pattern: '^[a-z]+$' } } }, { email: 'NOT A MATCH' }],
    ['a pattern that is not a regex', { type: 'object', properties: { email: { type: 'string', pattern: '(' } } }, { email: 'x' }],
    ['a schema the result breaks', { type: 'object', required: ['n'], properties: { n: { type: 'number' } } }, { n: 'text' }],
  ])('%s', async (_name, outputSchema, structuredContent) => {
    const up = await upstream({
      toolsList: (msg, res) => result(res, msg.id, { tools: [{ name: 'make', inputSchema: { type: 'object' }, outputSchema }] }),
      toolsCall: (msg, res) => result(res, msg.id, { content: [{ type: 'text', text: 'made' }], structuredContent }),
    });
    const { conn } = await ready(up.url);
    expect(await conn.call('make', {}, 5_000)).toMatchObject({ structuredContent });
    expect(up.counts['tools/call']).toBe(1);
  });

  it('a declared output schema does not make structured content required', async () => {
    const up = await upstream({
      toolsList: (msg, res) => result(res, msg.id, { tools: [{ name: 'make', inputSchema: { type: 'object' }, outputSchema: { type: 'object' } }] }),
    });
    const { conn } = await ready(up.url);
    expect(await conn.call('make', {}, 5_000)).toMatchObject({ content: [{ type: 'text', text: 'ok' }] });
  });
});

describe('the catalog', () => {
  it('is walked for at most 8 pages, and keeps their tools', async () => {
    // Pages for ever: every page names a next one.
    const up = await upstream({
      toolsList: (msg, res) => {
        const page = Number(msg.params?.cursor ?? 0);
        result(res, msg.id, { tools: [{ name: `t${String(page)}`, inputSchema: { type: 'object' } }], nextCursor: String(page + 1) });
      },
    });
    const { conn, states } = connect(up.url);
    cleanup.push(() => conn.stop());
    await until(() => states.some((s) => s.ready));
    await conn.stop();
    expect(up.counts['tools/list']).toBe(8);
    expect(states.find((s) => s.ready)?.tools.map((t) => t.name)).toEqual(['t0', 't1', 't2', 't3', 't4', 't5', 't6', 't7']);
  });

  it('is listed once at a time: a list_changed during a listing runs one more after it', async () => {
    const sse = stream();
    const held: Array<() => void> = [];
    let hold = false;
    let inFlight = 0;
    let peak = 0;
    let generation = 0;
    const up = await upstream({
      get: sse.get,
      toolsList: (msg, res) => {
        const tools = [{ name: `gen${String(generation++)}`, inputSchema: { type: 'object' } }];
        if (!hold) return result(res, msg.id, { tools });
        peak = Math.max(peak, ++inFlight);
        held.push(() => {
          inFlight--;
          result(res, msg.id, { tools });
        });
      },
    });
    const { conn } = await ready(up.url);
    await until(sse.opened);
    hold = true;
    const listChanged = event({ method: 'notifications/tools/list_changed' });
    sse.write(listChanged);
    await until(() => held.length === 1);
    // Spaced wider than the SDK's own 300 ms debounce, which merged only notifications closer than it.
    for (let i = 0; i < 2; i++) {
      sse.write(listChanged);
      await sleep(350);
    }
    expect(peak).toBe(1);
    hold = false;
    for (const answer of held.splice(0)) answer();
    await until(() => conn.state.tools[0]?.name === 'gen2');
    await sleep(100);
    // connect's listing, the held one, and the one the two notifications during it asked for.
    expect(up.counts['tools/list']).toBe(3);
  });
});

describe('requests from the upstream', () => {
  const pings = (n: number, from = 0): string => Array.from({ length: n }, (_, i) => event({ id: from + i, method: 'ping' })).join('');

  it(`are answered at most ${String(SERVER_REQUESTS_IN_FLIGHT)} at a time`, async () => {
    const sse = stream();
    const held: ServerResponse[] = [];
    const up = await upstream({ get: sse.get, answer: (_msg, res) => void held.push(res) });
    cleanup.push(async () => {
      for (const res of held) res.writeHead(202).end();
    });
    await ready(up.url);
    await until(sse.opened);
    sse.write(pings(50));
    await until(() => (up.counts.answer ?? 0) >= 1);
    await sleep(300);
    expect(up.counts.answer).toBe(SERVER_REQUESTS_IN_FLIGHT);
    // Once those answers are through, a new request is answered again.
    for (const res of held.splice(0)) res.writeHead(202).end();
    await sleep(50);
    sse.write(pings(1, 100));
    await until(() => up.counts.answer === SERVER_REQUESTS_IN_FLIGHT + 1);
  });

  it(`are answered at most ${String(SERVER_REQUESTS_PER_SECOND)} a second`, async () => {
    const sse = stream();
    const up = await upstream({ get: sse.get });
    await ready(up.url);
    await until(sse.opened);
    for (let i = 0; i < 5; i++) {
      sse.write(pings(10, i * 10));
      await sleep(50);
    }
    await sleep(200);
    expect(up.counts.answer).toBeGreaterThanOrEqual(1);
    expect(up.counts.answer).toBeLessThanOrEqual(SERVER_REQUESTS_PER_SECOND);
  });
});

// What the SDK does with each event is the gateway's CPU on the event loop every user shares: an
// upstream writing notifications as fast as it could took it (a call to the same gateway from 0.8
// to 70 ms). Past EVENTS_PER_SECOND (after a burst of EVENTS_BURST) its streams are read no further
// until their events are due: counted here as what the upstream could write before the gateway
// stopped reading (TCP back-pressure), which without the pace is all it likes.
describe('an upstream that floods its event stream', () => {
  it(`is read at ${String(EVENTS_PER_SECOND)} events a second, and its calls are answered meanwhile`, async () => {
    let written = 0;
    let flooding = true;
    const note = event({ method: 'notifications/message', params: { level: 'info', data: 'x'.repeat(2000) } });
    const up = await upstream({
      get: (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const pump = (): void => {
          while (flooding && res.write(note)) written++;
          if (flooding) res.once('drain', pump);
        };
        pump();
      },
    });
    const { conn } = await ready(up.url);
    await until(() => (up.counts.get ?? 0) >= 1);
    await sleep(2000);
    const read = written;
    // A call to the flooding upstream is still answered.
    const answer = await conn.call('echo', {}, 5_000);
    flooding = false;
    expect(answer.content).toEqual([{ type: 'text', text: 'ok' }]);
    // What it could write in 2 s: the burst, 2 s at the pace, and what the sockets between hold
    // (allowed 10 MiB; 3,300 events in all here). Read as it came, it was 36,000 here.
    expect(read).toBeLessThan(EVENTS_BURST + 2 * EVENTS_PER_SECOND + (10 * 1024 * 1024) / note.length);
    expect(read).toBeGreaterThan(EVENTS_BURST);
  });
});

describe('a log line of requests from the upstream dropped over the bound', () => {
  it('names a method the upstream made up only when it looks like one, and stays short', async () => {
    const sse = stream();
    const held: ServerResponse[] = [];
    const up = await upstream({ get: sse.get, answer: (_msg, res) => void held.push(res) });
    cleanup.push(async () => {
      for (const res of held) res.writeHead(202).end();
    });
    const lines: string[] = [];
    const conn = new UpstreamConnection(
      'hostile',
      { url: up.url, headers: {} },
      {
        healthIntervalMs: 60_000,
        requestTimeoutMs: 5_000,
        messageMaxBytes: 16 << 20,
        onState: () => undefined,
        log: pino({ level: 'warn' }, { write: (l: string) => void lines.push(l) }),
      },
    );
    cleanup.push(() => conn.stop());
    conn.start();
    await until(() => conn.state.ready);
    await until(sse.opened);
    const method = `${'m'.repeat(100_000)} UPSTREAM-TEXT`;
    sse.write(Array.from({ length: SERVER_REQUESTS_IN_FLIGHT + 1 }, (_, i) => event({ id: i, method })).join(''));
    await until(() => lines.some((l) => l.includes('Dropped requests from an upstream')));
    const line = lines.find((l) => l.includes('Dropped requests from an upstream')) ?? '';
    expect(line).not.toContain('UPSTREAM-TEXT');
    expect(line.length).toBeLessThan(1000);
  });
});

describe('the event stream', () => {
  it('is reopened no sooner than a second after it ended, whatever its retry: says', async () => {
    const up = await upstream({
      get: (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end('retry: 0\n\n');
      },
    });
    const { conn }: { conn: UpstreamConnection } = await ready(up.url);
    await until(() => (up.counts.get ?? 0) >= 1);
    await sleep(600);
    expect(up.counts.get).toBe(1);
    expect(conn.state.ready).toBe(true);
  });
});

describe('a call answered on an event stream', () => {
  // The spec says the upstream SHOULD close it after the answer; one that did not kept a
  // connection and a stream in the gateway per call for as long as it liked.
  it.each<[string, (res: ServerResponse) => void]>([
    ['keeps it open, silent', () => undefined],
    ['keeps it open, writing comments', (res) => void res.write(': still here\n\n')],
    ['ends it', (res) => void res.end()],
  ])('whose upstream %s: the stream is ended once the answer was read', async (_name, after) => {
    let open = 0;
    const up = await upstream({
      toolsCall: (msg, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(event({ method: 'notifications/message', params: { level: 'info', data: 'working' } }));
        res.write(event({ id: msg.id, result: { content: [{ type: 'text', text: 'ok' }] } }));
        open++;
        res.on('close', () => open--);
        after(res);
      },
    });
    const { conn } = await ready(up.url);
    for (let i = 0; i < 5; i++) expect(await conn.call('echo', {}, 5_000)).toMatchObject({ content: [{ type: 'text', text: 'ok' }] });
    await until(() => open === 0, 15_000);
    expect(up.counts['tools/call']).toBe(5);
    expect(conn.state.ready).toBe(true);
  });
});

describe('a call whose upstream never answers on its event stream', () => {
  // The SDK gives the call up (a timeout, or the run ended) with notifications/cancelled, and
  // leaves the stream to the upstream: one that kept it open held one per call given up.
  it.each<[string, (conn: UpstreamConnection) => Promise<unknown>]>([
    ['times out', (conn) => conn.call('echo', {}, 200)],
    ['is aborted', (conn) => conn.call('echo', {}, 5_000, AbortSignal.timeout(200))],
  ])('and %s: the stream is ended', async (_name, callIt) => {
    let open = 0;
    const up = await upstream({
      toolsCall: (_msg, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(': working\n\n');
        open++;
        res.on('close', () => open--);
      },
    });
    const { conn } = await ready(up.url);
    for (let i = 0; i < 3; i++) await expect(callIt(conn)).rejects.toMatchObject({ code: expect.stringMatching(/^(timeout|aborted)$/) });
    // (the last cancellation may arrive after its stream closed: both are waited for)
    await until(() => open === 0 && (up.counts['notifications/cancelled'] ?? 0) >= 3, 15_000);
    expect(up.counts['notifications/cancelled']).toBe(3);
  });
});

describe('a tool error quoting the credentials sent', () => {
  const token = 's3cr3t-token-value';
  it.each<[string, Record<string, string>, string, string, string?]>([
    ['the bearer token alone', { Authorization: `Bearer ${token}` }, `invalid token ${token}`, 'invalid token [redacted]'],
    ['a header value', { 'X-Api-Key': token }, `key "${token}" revoked`, 'key "[redacted]" revoked'],
    ['nothing secret', { 'X-Api-Key': token }, 'no such issue', 'no such issue'],
    ['a key in the URL’s query', {}, `key "${token}" revoked`, 'key "[redacted]" revoked', `?api_key=${token}`],
  ])('has %s removed from its text', async (_name, headers, text, expected, query = '') => {
    const up = await upstream({
      toolsCall: (msg, res) =>
        result(res, msg.id, {
          isError: true,
          content: [
            { type: 'text', text },
            { type: 'image', data: 'AAAA', mimeType: 'image/png' },
          ],
        }),
    });
    const { conn } = await ready(`${up.url}${query}`, headers);
    expect(await conn.call('echo', {}, 5_000)).toMatchObject({
      isError: true,
      content: [
        { type: 'text', text: expected },
        { type: 'image', data: 'AAAA' },
      ],
    });
  });
});

describe('a successful result quoting the credentials sent', () => {
  // A tool that echoes its request (headers included) hands the program the team's credentials.
  const token = 's3cr3t-token-value';
  it.each<[string, Record<string, string>, string]>([
    ['the bearer token', { Authorization: `Bearer ${token}` }, ''],
    ['a header value', { 'X-Api-Key': token }, ''],
    ['a key in the URL’s query', {}, `?api_key=${token}`],
  ])('has %s removed from its text, embedded resources and structured content', async (_name, headers, query) => {
    const up = await upstream({
      toolsCall: (msg, res) =>
        result(res, msg.id, {
          content: [
            { type: 'text', text: `token: ${token}` },
            { type: 'resource', resource: { uri: 'echo://request', text: `x-api-key: ${token}` } },
            { type: 'image', data: 'AAAA', mimeType: 'image/png' },
          ],
          structuredContent: JSON.parse(`{"request": {"headers": [["x", "${token}"]], "${token}": 1, "n": 2}, "__proto__": {"k": "${token}"}}`) as object,
        }),
    });
    const { conn } = await ready(`${up.url}${query}`, headers);
    const got = await conn.call('echo', {}, 5_000);
    expect(JSON.stringify(got)).not.toContain(token);
    expect(got.content).toEqual([
      { type: 'text', text: 'token: [redacted]' },
      { type: 'resource', resource: { uri: 'echo://request', text: 'x-api-key: [redacted]' } },
      { type: 'image', data: 'AAAA', mimeType: 'image/png' },
    ]);
    // (the SDK's result schema drops the "__proto__" key before the connection sees it)
    expect(JSON.stringify(got.structuredContent)).toBe('{"request":{"headers":[["x","[redacted]"]],"[redacted]":1,"n":2}}');
  });

  it('is returned as it came when it quotes nothing secret', async () => {
    const sent = { content: [{ type: 'text', text: 'plain' }], structuredContent: { a: ['b', 1, null, true] } };
    const up = await upstream({ toolsCall: (msg, res) => result(res, msg.id, sent) });
    const { conn } = await ready(up.url, { Authorization: `Bearer ${token}` });
    expect(await conn.call('echo', {}, 5_000)).toMatchObject(sent);
  });
});
