import { describe, expect, it } from 'vitest';
import { RESPONSE_TOO_LARGE_CODE, boundedEvents, boundedFetch, eventEnd, requestId } from '../../src/upstreams/bounded-fetch.js';

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
    ['ends a call stream with the replacement at an oversized event', [small, big, small], true, `${small}[cut]\n\n`, 1],
    ['ends at an oversized event that never ends', [small, 'data: ' + 'y'.repeat(80), 'y'.repeat(80)], true, `${small}[cut]\n\n`, 1],
    ['keeps a final event without a blank line', [small, 'data: tail'], false, `${small}data: tail`, 0],
    ['finds a blank line split between chunks', ['data: 1\r\n', '\r\ndata: 2\n\n'], false, 'data: 1\r\n\r\ndata: 2\n\n', 0],
  ])('%s', async (_name, chunks, end, expected, oversize) => {
    expect(await throughEvents(chunks, 64, end)).toEqual({ out: expected, oversize });
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
