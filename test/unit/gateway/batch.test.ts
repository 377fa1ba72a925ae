// JSON-RPC batch cap over real HTTP: a 2025-03-26 client may POST an array; one over
// CODEMODE_MAX_BATCH_SIZE is refused with 400 and a JSON-RPC error before any of it runs.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from 'node:net';
import { MAX_MCP_BODY_BYTES } from '../../../src/gateway/app.js';
import { sleep, startGateway, type Gateway } from './harness.js';

const HEADERS = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  'mcp-protocol-version': '2025-03-26',
};

function call(id: number): object {
  return { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'execute_code', arguments: { code: `print(${id})` } } };
}

describe('JSON-RPC batch limit', () => {
  let gateway: Gateway;
  beforeAll(async () => {
    gateway = await startGateway({ maxBatchSize: 3 });
  });
  afterAll(async () => {
    await gateway.close();
  });

  it('refuses a batch over the limit with HTTP 400 and a JSON-RPC error that states it; nothing runs', async () => {
    const before = gateway.service.calls.length;
    const res = await fetch(gateway.url, { method: 'POST', headers: HEADERS, body: JSON.stringify([1, 2, 3, 4].map(call)) });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { jsonrpc: string; id: unknown; error: { code: number; message: string; data: unknown } };
    expect(body).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32600, data: { limit: 'batch_size', max: 3, received: 4 } } });
    expect(body.error.message).toContain('this JSON-RPC batch holds 4 messages; the limit is 3 (CODEMODE_MAX_BATCH_SIZE)');
    expect(gateway.service.calls.length).toBe(before);
  });

  it('serves a batch within the limit (the parsed body is handed to the SDK)', async () => {
    const before = gateway.service.calls.length;
    const res = await fetch(gateway.url, { method: 'POST', headers: HEADERS, body: JSON.stringify([1, 2, 3].map(call)) });
    expect(res.status).toBe(200);
    const text = await res.text();
    for (const id of [1, 2, 3]) expect(text).toContain(`"id":${id}`);
    expect(gateway.service.calls.length).toBe(before + 3);
  });

  it.each([
    ['invalid JSON', '{"jsonrpc":', 400],
    ['an empty body', '', 400],
  ])('leaves %s to the SDK', async (_name, body, status) => {
    const res = await fetch(gateway.url, { method: 'POST', headers: HEADERS, body });
    expect(res.status).toBe(status);
    expect(((await res.json()) as { error: { code: number } }).error.code).toBe(-32700);
  });

  // The check reads the request's own body (no clone); what it hands back to the SDK must be the
  // bytes the client sent, also when they came in several chunks or the read stopped at the limit.
  const streamed = (parts: string[]): ReadableStream<Uint8Array> =>
    new ReadableStream({
      pull(controller) {
        const part = parts.shift();
        if (part === undefined) controller.close();
        else controller.enqueue(new TextEncoder().encode(part));
      },
    });
  const overLimit = 'x'.repeat(MAX_MCP_BODY_BYTES + 1);
  it.each([
    ['invalid JSON in several chunks, without a length', () => streamed(['{"jsonrpc":', '"2.0", "id": 1,', ' "method"']), 400, -32700],
    ['a body over the 12 MiB limit, with its length', () => overLimit, 413, undefined],
    ['a body over the 12 MiB limit, streamed without a length', () => streamed([overLimit.slice(0, 7_000_000), overLimit.slice(7_000_000)]), 413, undefined],
  ])('hands %s to the SDK as it was sent', async (_name, body, status, code) => {
    const before = gateway.service.calls.length;
    const res = await fetch(gateway.url, { method: 'POST', headers: HEADERS, body: body(), duplex: 'half' } as RequestInit);
    expect(res.status).toBe(status);
    if (code !== undefined) expect(((await res.json()) as { error: { code: number } }).error.code).toBe(code);
    else await res.body?.cancel();
    expect(gateway.service.calls.length).toBe(before);
  });

  it('takes a body as large as a write_file of the largest file (8 MiB, in base64) to the tool', async () => {
    const content = Buffer.alloc(8 * 1024 * 1024, 1).toString('base64');
    const res = await fetch(gateway.url, {
      method: 'POST',
      headers: HEADERS,
      body: JSON.stringify({ jsonrpc: '2.0', id: 11, method: 'tools/call', params: { name: 'execute_code', arguments: { code: content } } }),
    });
    expect(res.status).toBe(200);
    // The tool itself refuses code this long: the body got past the HTTP limit to it.
    expect(await res.text()).toMatch(/"isError":true.*"id":11/s);
  });

  it('serves a call streamed in several chunks without a length', async () => {
    const json = JSON.stringify(call(7));
    const res = await fetch(gateway.url, {
      method: 'POST',
      headers: HEADERS,
      body: streamed([json.slice(0, 10), json.slice(10)]),
      duplex: 'half',
    } as RequestInit);
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('"id":7');
  });

  // A body of declared length is read from the socket directly: a client that goes away before
  // sending all of it runs nothing and leaves the gateway serving.
  it('runs nothing for a body cut short of its declared length, and goes on serving', async () => {
    const before = gateway.service.calls.length;
    const json = JSON.stringify(call(8));
    const { hostname, port } = new URL(gateway.url);
    const socket = connect(Number(port), hostname);
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    const head = Object.entries(HEADERS)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    socket.write(`POST /mcp HTTP/1.1\r\nhost: ${hostname}:${port}\r\n${head}content-length: ${json.length}\r\n\r\n${json.slice(0, 20)}`);
    await sleep(100);
    socket.destroy();
    await sleep(100);
    const res = await fetch(gateway.url, { method: 'POST', headers: HEADERS, body: JSON.stringify(call(9)) });
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('"id":9');
    expect(gateway.service.calls.slice(before).map((c) => c.request.code)).toEqual(['print(9)']);
  });

  it('leaves a wrong content type to the SDK (415), even for a long array', async () => {
    const res = await fetch(gateway.url, {
      method: 'POST',
      headers: { ...HEADERS, 'content-type': 'text/plain' },
      body: JSON.stringify([1, 2, 3, 4].map(call)),
    });
    expect(res.status).toBe(415);
  });
});
