// A failed upstream call reaches the program as the kind its cause is (src/codemode/call-failures.ts):
// a timeout of the server's own or of the wait in line is `timeout`, a full line is `limit`, a
// refusal is `denied`, the rest `unavailable` — and the metrics count the same outcome.
import { describe, expect, it } from 'vitest';
import { ToolBroker, type CallOutcome } from '../../../src/codemode/broker.js';
import type { CallFrame } from '../../../src/codemode/frames.js';
import { registryCaller } from '../../../src/codemode/registry-caller.js';
import { ToolFilter } from '../../../src/upstreams/policy.js';
import { Upstreams, type UpstreamEntry } from '../../../src/upstreams/registry.js';
import { UpstreamError, type UpstreamErrorCode } from '../../../src/upstreams/types.js';
import { fakeUpstream } from './fake-upstream.js';

const limits = { maxCalls: 10, callTimeoutMs: 30_000, resultMaxBytes: 5_000, bytesPerRun: 50_000 };
const call = (server: string, tool: string, callId = 'c', args: Record<string, unknown> = {}): CallFrame => ({
  id: '1',
  type: 'call',
  callId,
  op: 'call',
  server,
  tool,
  args,
});

describe('an upstream call’s failure', () => {
  it.each<[UpstreamErrorCode | 'a plain Error', string, CallOutcome, RegExp]>([
    ['timeout', 'timeout', 'timeout', /^demo\.echo did not answer within 500 ms\.$/],
    ['busy', 'limit', 'limit', /^the message$/],
    ['search_limit', 'limit', 'limit', /^the message$/],
    ['unknown_server', 'denied', 'denied', /^the message$/],
    ['tool_denied', 'denied', 'denied', /^the message$/],
    ['unknown_tool', 'denied', 'denied', /^the message$/],
    ['not_ready', 'unavailable', 'failed', /^the message$/],
    ['aborted', 'unavailable', 'failed', /^the message$/],
    ['upstream_failed', 'unavailable', 'failed', /^the message$/],
    ['a plain Error', 'unavailable', 'failed', /^demo\.echo failed: the message$/],
  ])('%s is kind %s, outcome %s', async (code, kind, outcome, message) => {
    const seen: Array<[string, CallOutcome]> = [];
    const text = code === 'timeout' ? 'demo.echo did not answer within 500 ms.' : 'the message';
    const up = { ...fakeUpstream(), call: () => Promise.reject(code === 'a plain Error' ? new Error(text) : new UpstreamError(code, text)) };
    const b = new ToolBroker(up, limits, { upstreamCall: (s, o) => void seen.push([s, o]) });
    const answer = await b.forRun({}).handle(call('demo', 'echo', 'c', { message: 'x' }));
    expect(answer).toEqual({ ok: false, error: { kind, message: expect.stringMatching(message) as unknown as string } });
    expect(seen).toEqual([['demo', outcome]]);
  });
});

describe('over the registry', () => {
  const entry = (over: Partial<UpstreamEntry>): UpstreamEntry => ({
    name: 'slow',
    access: undefined,
    filter: new ToolFilter({}),
    callTimeoutMs: 60_000,
    ready: true,
    reason: 'CatalogLoaded',
    tools: [{ server: 'slow', name: 'wait', inputSchema: { type: 'object' } }],
    ...over,
  });

  it('a server’s callTimeoutSeconds shorter than the broker’s is a timeout', async () => {
    const registry = new Upstreams();
    // As UpstreamConnection.call does: the SDK's request timeout becomes UpstreamError('timeout').
    const hang = (tool: string, _a: unknown, timeoutMs: number, signal?: AbortSignal): Promise<never> =>
      new Promise((_resolve, reject) => {
        const t = setTimeout(() => reject(new UpstreamError('timeout', `slow.${tool} did not answer within ${timeoutMs} ms.`)), timeoutMs);
        signal?.addEventListener('abort', () => (clearTimeout(t), reject(new UpstreamError('aborted', 'cancelled'))));
      });
    registry.set(entry({ callTimeoutMs: 100, call: hang }));
    const seen: CallOutcome[] = [];
    const r = new ToolBroker(registryCaller(registry), limits, { upstreamCall: (_s, o) => void seen.push(o) }).forRun({ owner: { user: 'alice' } });
    expect(await r.handle(call('slow', 'wait'))).toEqual({ ok: false, error: { kind: 'timeout', message: 'slow.wait did not answer within 100 ms.' } });
    expect(seen).toEqual(['timeout']);
  });

  it('a wait in line that used the server’s whole time is a timeout', async () => {
    const registry = new Upstreams({ perServer: 8, perUser: 1 });
    registry.set(entry({ callTimeoutMs: 150, call: () => new Promise(() => undefined) }));
    const r = new ToolBroker(registryCaller(registry), { ...limits, callTimeoutMs: 400 }).forRun({ owner: { user: 'alice' } });
    const [, second] = await Promise.all([r.handle(call('slow', 'wait', 'a')), r.handle(call('slow', 'wait', 'b'))]);
    expect(second).toMatchObject({
      ok: false,
      error: { kind: 'timeout', message: expect.stringMatching(/^The call of slow waited its whole time for a place/) },
    });
  });
});
