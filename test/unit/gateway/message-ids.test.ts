// Request ids and progress tokens the gateway repeats (message-ids.ts): a progress token is in
// every progress notification of its call, so a 1 MiB one on a call that printed for a second made
// a 20 MiB response that no budget counted. A longer id or token than any client uses is refused
// before anything runs.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_ID_CHARS, oversizedId } from '../../../src/gateway/message-ids.js';
import { outcome, sleep, startGateway, type Gateway } from './harness.js';

const long = 'x'.repeat(MAX_ID_CHARS + 1);
const fits = 'x'.repeat(MAX_ID_CHARS);
const call = (id: unknown, token?: unknown): Record<string, unknown> => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name: 'execute_code', arguments: { code: 'print(1)' }, ...(token !== undefined && { _meta: { progressToken: token } }) },
});

describe('oversizedId', () => {
  it.each([
    ['a number id and token', call(1, 2), undefined],
    ['an id and a token at the limit', call(fits, fits), undefined],
    ['a long id', call(long), 'id'],
    ['a long progress token', call(1, long), 'progressToken'],
    ['a long token in a batch', [call(1), call(2, long)], 'progressToken'],
    ['a notification without params', { jsonrpc: '2.0', method: 'notifications/initialized' }, undefined],
    ['not a message', 'text', undefined],
    ['_meta that is not an object', { jsonrpc: '2.0', id: 1, method: 'x', params: { _meta: 'y' } }, undefined],
  ])('%s', (_name, body, expected) => {
    expect(oversizedId(body)).toBe(expected);
  });
});

describe('over HTTP', () => {
  let gateway: Gateway;
  beforeAll(async () => {
    gateway = await startGateway();
    // A run that prints every tick for a second: a progress notification each tick.
    gateway.service.behaviour = async (_req, options) => {
      for (let i = 0; i < 20; i++) {
        options.onOutput?.({ stream: 'stdout', text: 'x' });
        await sleep(60);
      }
      return outcome({ stdout: 'ok' });
    };
  });
  afterAll(async () => {
    await gateway.close();
  });

  const post = (body: unknown): Promise<Response> =>
    fetch(gateway.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
      body: JSON.stringify(body),
    });

  it.each([
    ['a 1 MiB progress token', call(1, 'p'.repeat(1024 * 1024)), /progress token/],
    ['a 1 MiB request id', call('i'.repeat(1024 * 1024), 1), /request id/],
  ])('refuses %s before it runs, without repeating it', async (_name, body, message) => {
    const before = gateway.service.calls.length;
    const res = await post(body);
    const text = await res.text();
    expect(res.status).toBe(400);
    expect(text).toMatch(message);
    expect(text.length).toBeLessThan(1000);
    expect(gateway.service.calls.length).toBe(before);
  });

  it('serves a call whose token is a UUID, with its progress', async () => {
    const res = await post(call(1, '0f8fad5b-d9cb-469f-a165-70867728950e'));
    const text = await res.text();
    expect(res.status).toBe(200);
    expect(text).toMatch(/notifications\/progress/);
    expect(text).toMatch(/"result"/);
  });
});
