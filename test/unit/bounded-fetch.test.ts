import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { AnswerStreams, EventPace, RESPONSE_TOO_LARGE_CODE, boundedEvents, boundedFetch, eventEnd, requestId } from '../../src/upstreams/bounded-fetch.js';

describe('eventEnd (the blank line that ends an SSE event)', () => {
  it.each<[string, { at: number; length: number } | undefined]>([
    ['data: a\n\n', { at: 7, length: 2 }],
    ['data: a\r\n\r\n', { at: 7, length: 4 }],
    ['data: a\r\rdata', { at: 7, length: 2 }],
    ['data: a\n\r\n', { at: 7, length: 3 }],
    ['data: a\r\ndata: b\r\n', undefined],
    ['data: a\ndata: b\n', undefined],
    ['data: a\r\n', undefined],
    ['', undefined],
  ])('%j → %j', (text, expected) => {
    expect(eventEnd(Buffer.from(text), 0)).toEqual(expected);
  });
});

it.each<[unknown, string | number | null]>([
  ['{"jsonrpc":"2.0","id":7,"method":"tools/call"}', 7],
  ['{"jsonrpc":"2.0","id":"a-1","method":"tools/call"}', 'a-1'],
  ['{"jsonrpc":"2.0","method":"notifications/initialized"}', null],
  ['[{"jsonrpc":"2.0","id":1}]', null],
  ['not json', null],
  [undefined, null],
])('requestId(%j) = %j', (body, id) => {
  expect(requestId(body as string)).toBe(id);
});

/** Runs `chunks` through boundedEvents(max) and returns the text that came out. */
async function throughEvents(chunks: string[], max: number, end: boolean): Promise<{ out: string; oversize: number }> {
  let oversize = 0;
  const source = new ReadableStream<Uint8Array>({
    start(c) {
      for (const ch of chunks) c.enqueue(new TextEncoder().encode(ch));
      c.close();
    },
  });
  const out = source.pipeThrough(
    boundedEvents(max, () => {
      oversize++;
      return { replacement: end ? '[cut]\n\n' : '', end };
    }),
  );
  return { out: await new Response(out).text(), oversize };
}

describe('boundedEvents', () => {
  const small = 'data: {"a":1}\n\n';
  const big = `data: ${'x'.repeat(100)}\n\n`;
  it.each<[string, string[], boolean, string, number]>([
    ['passes small events through unchanged', [small, small], false, small + small, 0],
    ['joins an event split across chunks', ['data: {"a"', ':1}\n', '\n'], false, small, 0],
    ['drops an oversized event on a notification stream and goes on', [small, big, small], false, small + small, 1],
    ['drops an oversized event split into pieces and goes on', [small, big.slice(0, 40), big.slice(40, 90), big.slice(90), small], false, small + small, 1],
    ['drops an oversized event that comes a byte per chunk and goes on', [small, ...big.split(''), ...small.split('')], false, small + small, 1],
    ['ends a call stream with the replacement at an oversized event', [small, big, small], true, `${small}[cut]\n\n`, 1],
    ['ends at an oversized event that never ends', [small, 'data: ' + 'y'.repeat(80), 'y'.repeat(80)], true, `${small}[cut]\n\n`, 1],
    ['keeps a final event without a blank line', [small, 'data: tail'], false, `${small}data: tail`, 0],
    ['finds a blank line split between chunks', ['data: 1\r\n', '\r\ndata: 2\n\n'], false, 'data: 1\r\n\r\ndata: 2\n\n', 0],
  ])('%s', async (_name, chunks, end, expected, oversize) => {
    expect(await throughEvents(chunks, 64, end)).toEqual({ out: expected, oversize });
  });

  it.each([
    ['one byte', 1],
    ['three bytes', 3],
    ['seven bytes', 7],
  ])('passes events split into pieces of %s on whole and in order', async (_name, size) => {
    const events = ['data: 1\n\n', 'event: message\r\ndata: {"b":2}\r\n\r\n', `data: ${'z'.repeat(50)}\n\n`, 'data: last\n\n'].join('');
    const pieces = Array.from({ length: Math.ceil(events.length / size) }, (_, i) => events.slice(i * size, (i + 1) * size));
    expect(await throughEvents(pieces, 64, false)).toEqual({ out: events, oversize: 0 });
  });
});

describe('boundedFetch', () => {
  const post = { method: 'POST', body: '{"jsonrpc":"2.0","id":42,"method":"tools/call"}' };
  const answer =
    (body: string, type: string, status = 200): (() => Promise<Response>) =>
    () =>
      Promise.resolve(new Response(body, { status, headers: { 'content-type': type } }));

  it.each<[string, string, string, RequestInit, boolean]>([
    ['a small JSON answer', '{"jsonrpc":"2.0","id":42,"result":{}}', 'application/json', post, false],
    ['a large JSON answer', `{"jsonrpc":"2.0","id":42,"result":{"t":"${'z'.repeat(200)}"}}`, 'application/json', post, true],
    [
      'a large SSE answer to a call',
      `event: message\ndata: {"jsonrpc":"2.0","id":42,"result":{"t":"${'z'.repeat(200)}"}}\n\n`,
      'text/event-stream',
      post,
      true,
    ],
  ])('%s', async (_name, body, type, init, cut) => {
    const dropped: string[] = [];
    const res = await boundedFetch(128, (k) => void dropped.push(k), answer(body, type))('http://u/mcp', init);
    const text = await res.text();
    if (!cut) {
      expect(text).toBe(body);
      expect(dropped).toEqual([]);
      return;
    }
    const json = JSON.parse(type === 'application/json' ? text : text.replace(/^event: message\ndata: /, '')) as {
      id: unknown;
      error: { code: number; message: string };
    };
    expect(json.id).toBe(42);
    expect(json.error.code).toBe(RESPONSE_TOO_LARGE_CODE);
    expect(json.error.message).toMatch(/larger than 128 bytes/);
    expect(text).not.toContain('zzzz');
    expect(dropped).toHaveLength(1);
  });

  it.each([
    ['within the bound', 100, false],
    ['past the bound', 200, true],
  ])('reads a JSON answer that comes a byte per chunk, %s', async (_name, length, cut) => {
    const body = `{"t":"${'j'.repeat(length)}"}`;
    const bytes = new TextEncoder().encode(body);
    let i = 0;
    const trickled = new ReadableStream<Uint8Array>({
      pull: (c) => (i < bytes.length ? c.enqueue(bytes.subarray(i, ++i)) : c.close()),
    });
    const base = (): Promise<Response> => Promise.resolve(new Response(trickled, { headers: { 'content-type': 'application/json' } }));
    const dropped: string[] = [];
    const text = await (await boundedFetch(128, (k) => void dropped.push(k), base)('http://u/mcp', post)).text();
    expect(text === body).toBe(!cut);
    expect(dropped).toEqual(cut ? ['json'] : []);
  });

  // The MCP client passes one long-lived signal to every request; undici keeps a listener on it
  // per request until garbage collection, so the wrapper gives each request a signal of its own
  // and unhooks it from the caller's once the response is read.
  it.each<[string, () => Promise<Response>, boolean]>([
    ['a JSON answer', answer('{"jsonrpc":"2.0","id":42,"result":{}}', 'application/json'), false],
    ['a JSON answer past the bound', answer(`{"t":"${'z'.repeat(200)}"}`, 'application/json'), false],
    ['an SSE answer', answer('event: message\ndata: {"jsonrpc":"2.0","id":42,"result":{}}\n\n', 'text/event-stream'), false],
    ['an SSE answer past the bound', answer(`event: message\ndata: {"t":"${'z'.repeat(200)}"}\n\n`, 'text/event-stream'), false],
    ['a 204', () => Promise.resolve(new Response(null, { status: 204 })), false],
    ['a failed request', () => Promise.reject(new TypeError('fetch failed')), true],
  ])('leaves no listener on the caller’s signal once %s is read', async (_name, base, fails) => {
    const caller = new AbortController();
    const f = boundedFetch(128, () => undefined, base);
    for (let i = 0; i < 3; i++) {
      const got = f('http://u/mcp', { ...post, signal: caller.signal }).then((r) => r.text());
      if (fails) await expect(got).rejects.toThrow(/fetch failed/);
      else await got;
    }
    expect(getEventListeners(caller.signal, 'abort')).toHaveLength(0);
  });

  it('aborts an SSE body still being read when the caller’s signal aborts, then lets go of it', async () => {
    const caller = new AbortController();
    let seen: AbortSignal | null | undefined;
    const base = (_url: string | URL, init?: RequestInit): Promise<Response> => {
      seen = init?.signal;
      const body = new ReadableStream<Uint8Array>({
        start(c) {
          c.enqueue(new TextEncoder().encode('event: message\ndata: {}\n\n'));
          init?.signal?.addEventListener('abort', () => c.error(init.signal?.reason));
        },
      });
      return Promise.resolve(new Response(body, { headers: { 'content-type': 'text/event-stream' } }));
    };
    const res = await boundedFetch(128, () => undefined, base)('http://u/mcp', { method: 'GET', signal: caller.signal });
    expect(seen).not.toBe(caller.signal);
    const reader = res.body!.getReader();
    expect((await reader.read()).done).toBe(false);
    expect(getEventListeners(caller.signal, 'abort')).toHaveLength(1);
    caller.abort(new Error('transport closed'));
    await expect(reader.read()).rejects.toThrow(/transport closed/);
    expect(getEventListeners(caller.signal, 'abort')).toHaveLength(0);
  });

  it('passes a 202 without a body and a 204 untouched', async () => {
    const accepted = await boundedFetch(128, () => undefined, answer('', 'application/json', 202))('http://u/mcp', post);
    expect(accepted.status).toBe(202);
    const none = await boundedFetch(
      128,
      () => undefined,
      () => Promise.resolve(new Response(null, { status: 204 })),
    )('http://u/mcp', post);
    expect(none.status).toBe(204);
  });
});

describe('AnswerStreams (a call’s event stream, ended once its answer was read)', () => {
  const call = { method: 'POST', body: '{"jsonrpc":"2.0","id":7,"method":"tools/call"}' };
  /** An event stream that sends the answer and stays open until cancelled; `cancelled` says whether it was. */
  function openStream(): { base: () => Promise<Response>; cancelled: () => boolean } {
    let cancelled = false;
    const body = new ReadableStream<Uint8Array>({
      start: (c) => c.enqueue(new TextEncoder().encode('event: message\ndata: {"jsonrpc":"2.0","id":7,"result":{}}\n\n')),
      cancel: () => void (cancelled = true),
    });
    return { base: () => Promise.resolve(new Response(body, { headers: { 'content-type': 'text/event-stream' } })), cancelled: () => cancelled };
  }

  it.each<[string, number | string, boolean]>([
    ['its own answer', 7, true],
    ['another request’s answer', 8, false],
  ])('ends the stream, and cancels the upstream’s body, on %s', async (_name, id, ends) => {
    const answers = new AnswerStreams();
    const up = openStream();
    const res = await boundedFetch(1024, () => undefined, up.base, answers)('http://u/mcp', call);
    const reader = res.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toContain('"id":7');
    expect(answers.size).toBe(1);
    answers.answered(id);
    const next = await Promise.race([reader.read(), new Promise((resolve) => setTimeout(() => resolve('open'), 50))]);
    expect(next).toEqual(ends ? { done: true, value: undefined } : 'open');
    expect(answers.size).toBe(ends ? 0 : 1);
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(up.cancelled()).toBe(ends);
    await reader.cancel();
    expect(answers.size).toBe(0);
  });
});

describe('EventPace (one upstream’s events a second, after a burst)', () => {
  // 100 a second after a burst of 10; each step takes `events` at time `at` (ms) and says how long to wait.
  it.each<[string, Array<[at: number, events: number]>, number[]]>([
    ['within the burst: no wait', [[0, 10]], [0]],
    ['past the burst: the wait until the last is due', [[0, 15]], [50]],
    [
      'the bucket refills at the pace',
      [
        [0, 10],
        [100, 10],
      ],
      [0, 0],
    ],
    [
      'but never past the burst',
      [
        [0, 0],
        [10_000, 11],
      ],
      [0, 10],
    ],
    [
      'a debt is paid before more are due',
      [
        [0, 20],
        [50, 5],
      ],
      [100, 100],
    ],
    [
      'one event at a time at the pace never waits',
      [
        [0, 10],
        [10, 1],
        [20, 1],
        [30, 1],
      ],
      [0, 0, 0, 0],
    ],
  ])('%s', (_name, steps, waits) => {
    let now = 0;
    const pace = new EventPace(100, 10, () => now);
    expect(steps.map(([at, events]) => ((now = at), pace.take(events)))).toEqual(waits);
  });
});

describe('boundedFetch with a pace', () => {
  const ev = (id: number | null, method?: string): string =>
    `event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', ...(id !== null && { id }), ...(method ? { method } : { result: {} }) })}\n\n`;
  const sse = (body: string) => () => Promise.resolve(new Response(body, { headers: { 'content-type': 'text/event-stream' } }));
  const post = { method: 'POST', body: '{"jsonrpc":"2.0","id":1,"method":"tools/call"}' };
  // What each stream counts against the upstream's pace: a call's first event (its answer) is free.
  it.each<[string, string, RequestInit, number]>([
    ['a call answered on its stream', ev(1), post, 0],
    ['a call with two progress notifications before its answer', ev(null, 'notifications/progress').repeat(2) + ev(1), post, 2],
    ['the event stream (GET): every event', ev(null, 'notifications/message').repeat(3), { method: 'GET' }, 3],
  ])('%s', async (_name, body, init, counted) => {
    const taken: number[] = [];
    const pace = { take: (n: number) => (taken.push(n), 0) };
    const res = await boundedFetch(1 << 20, () => undefined, sse(body), undefined, pace)('http://u/mcp', init);
    expect(await res.text()).toBe(body);
    expect(taken.reduce((a, b) => a + b, 0)).toBe(counted);
  });
});
