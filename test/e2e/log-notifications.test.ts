// execute_code sends the run's outcome as an MCP log notification (logger codemode.run) at the
// level the client asks for in the request (2026-07-28 envelope io.modelcontextprotocol/logLevel),
// and none when it asks for none. Raw HTTP: the SDK client offers no per-request log level.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_VERSION, GROUP, SANDBOXSESSION_KIND, SANDBOXSESSION_PLURAL, VERSION } from '../../src/api/v1alpha1/index.js';
import { createNamespace, deleteNamespace, testKube } from './helpers/kube.js';
import { startOperator, type RunningOperator } from './helpers/operator.js';

const k = testKube();
let ns = '';
let op: RunningOperator;

beforeAll(async () => {
  ns = await createNamespace(k, 'e2e-lognotif');
  op = await startOperator(ns);
}, 120_000);

afterAll(async () => {
  await op?.stop();
  await deleteNamespace(k, ns);
});

interface Message {
  method?: string;
  params?: { level?: string; logger?: string; data?: unknown };
  result?: { structuredContent?: { phase?: string; run?: string; session?: string; result?: string } };
}

/** One execute_code over raw HTTP; every JSON-RPC message of the response, in order. */
async function call(code: string, logLevel: string | undefined, args: Record<string, unknown> = {}): Promise<Message[]> {
  return tool('execute_code', { code, ...args }, logLevel);
}

/** One tool call over raw HTTP; every JSON-RPC message of the response, in order. */
async function tool(name: string, args: Record<string, unknown>, logLevel: string | undefined): Promise<Message[]> {
  const meta = {
    'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientCapabilities': {},
    'io.modelcontextprotocol/clientInfo': { name: 'e2e-log', version: '1' },
    ...(logLevel !== undefined && { 'io.modelcontextprotocol/logLevel': logLevel }),
  };
  const res = await fetch(op.url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'tools/call',
      'mcp-name': name,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args, _meta: meta } }),
  });
  const text = await res.text();
  expect(res.status, text.slice(0, 500)).toBe(200);
  if (!(res.headers.get('content-type') ?? '').includes('text/event-stream')) return [JSON.parse(text) as Message];
  return text
    .split('\n')
    .filter((l) => l.startsWith('data:'))
    .map((l) => JSON.parse(l.slice(5)) as Message);
}

const logs = (msgs: Message[]): Message[] => msgs.filter((m) => m.method === 'notifications/message');

describe('run lifecycle as MCP log notifications', () => {
  it.each([
    ['info: a success is logged', 'print(1)', 'info', 'info', /^SandboxRun .+ finished: Succeeded \(Succeeded\) in \d+ ms\.$/],
    ['info: a failure is logged as a warning', 'import sys; sys.exit(3)', 'info', 'warning', /finished: Failed \(NonZeroExit\)/],
    ['warning: a failure is logged', 'import sys; sys.exit(3)', 'warning', 'warning', /finished: Failed/],
    ['warning: a success is below the level', 'print(1)', 'warning', undefined, undefined],
    ['no level asked: nothing is sent', 'print(1)', undefined, undefined, undefined],
  ])('%s', { timeout: 120_000 }, async (_name, code, asked, level, data) => {
    const msgs = await call(code, asked);
    const result = msgs.at(-1)?.result;
    expect(result?.structuredContent?.phase).toBeDefined();
    const sent = logs(msgs);
    if (level === undefined) return expect(sent).toEqual([]);
    expect(sent).toEqual([
      { jsonrpc: '2.0', method: 'notifications/message', params: { level, logger: 'codemode.run', data: expect.stringMatching(data as RegExp) as string } },
    ]);
    // The notification names the run the result names; it goes out before the result.
    expect(String(sent[0]?.params?.data)).toContain(String(result?.structuredContent?.run));
    expect(msgs.indexOf(sent[0] as Message)).toBeLessThan(msgs.length - 1);
  });

  it('tells a call that waits for its busy session, then how it finished', { timeout: 180_000 }, async () => {
    const created = await tool('create_session', { language: 'python' }, undefined);
    const session = String(created.at(-1)?.result?.structuredContent?.session);
    const first = call('import time\ntime.sleep(2)', undefined, { session });
    await new Promise((r) => setTimeout(r, 300));
    const msgs = await call('41 + 1', 'info', { session });
    expect((await first).at(-1)?.result?.structuredContent?.phase).toBe('Succeeded');
    expect(msgs.at(-1)?.result?.structuredContent).toMatchObject({ phase: 'Succeeded', result: '42' });
    expect(logs(msgs).map((m) => m.params?.data)).toEqual([
      expect.stringMatching(new RegExp(`^Session ${session} is running another call; this call waits for its turn \\(at most \\d+ s\\)\\.$`)),
      expect.stringMatching(new RegExp(`^session ${session} finished: Succeeded`)),
    ]);
  });

  it('tells a call that waits for its session to start, then how it finished', { timeout: 120_000 }, async () => {
    // Applied as with kubectl: no warm pool here, so its pod starts while the call waits.
    const session = 'just-applied';
    await k.custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: ns,
      plural: SANDBOXSESSION_PLURAL,
      body: { apiVersion: API_VERSION, kind: SANDBOXSESSION_KIND, metadata: { name: session }, spec: { language: 'python' } },
    });
    const msgs = await call('6 * 7', 'info', { session });
    expect(msgs.at(-1)?.result?.structuredContent).toMatchObject({ phase: 'Succeeded', result: '42' });
    expect(logs(msgs).map((m) => m.params?.data)).toEqual([
      expect.stringMatching(new RegExp(`^Session ${session} is still starting; this call waits for it \\(at most \\d+ s\\)\\.$`)),
      expect.stringMatching(new RegExp(`^session ${session} finished: Succeeded`)),
    ]);
  });
});
