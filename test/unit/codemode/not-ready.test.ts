// A server the user may use that is not connected now (reconnecting after a Secret rotation, say)
// is theirs still: its calls are answered `unavailable` with "retry later", never `denied` with a
// ToolCallDenied Event, and execute_code's servers: [...] accepts it.
import { describe, expect, it } from 'vitest';
import { ToolBroker, type CallOutcome } from '../../../src/codemode/broker.js';
import type { CallFrame } from '../../../src/codemode/frames.js';
import { registryCaller } from '../../../src/codemode/registry-caller.js';
import { ToolFilter } from '../../../src/upstreams/policy.js';
import { Upstreams, type UpstreamEntry } from '../../../src/upstreams/registry.js';

const limits = { maxCalls: 10, callTimeoutMs: 5_000, resultMaxBytes: 5_000, bytesPerRun: 50_000 };
const tools = [{ server: 'github', name: 'list_issues', inputSchema: { type: 'object' } }];
const github = (ready: boolean): UpstreamEntry => ({
  name: 'github',
  access: { users: ['alice'] },
  filter: new ToolFilter(undefined),
  callTimeoutMs: 60_000,
  ready,
  reason: ready ? 'CatalogLoaded' : 'Connecting',
  ...(!ready && { message: 'Connecting.' }),
  tools: ready ? tools : [],
  call: () => Promise.resolve({ content: [{ type: 'text', text: '"ok"' }] }),
});
const frame = (f: Record<string, unknown>): CallFrame => ({ id: '1', type: 'call', callId: 'c', ...f }) as CallFrame;
const NOT_CONNECTED = { ok: false, error: { kind: 'unavailable', message: 'server "github" is not connected now (Connecting); retry later' } };

function setup(): { registry: Upstreams; broker: ToolBroker; seen: Array<[string, CallOutcome]> } {
  const registry = new Upstreams();
  registry.set(github(true));
  const seen: Array<[string, CallOutcome]> = [];
  const broker = new ToolBroker(registryCaller(registry), limits, { upstreamCall: (s, o) => void seen.push([s, o]) });
  return { registry, broker, seen };
}

describe('a server the user may use, reconnecting', () => {
  it.each<[string, Record<string, unknown>]>([
    ['a call', { op: 'call', server: 'github', tool: 'list_issues', args: {} }],
    ['describe(server)', { op: 'describe', server: 'github', detail: 'full' }],
    ['describe(server, tool)', { op: 'describe', server: 'github', tool: 'list_issues', detail: 'full' }],
  ])('answers %s "retry later", without an Event', async (_name, f) => {
    const { registry, broker, seen } = setup();
    const denied: string[] = [];
    const run = broker.forRun({ owner: { user: 'alice' }, servers: ['github'], onDenied: (m) => void denied.push(m) });
    expect(await run.handle(frame(f))).toMatchObject({ ok: true });
    registry.set(github(false));
    expect(await run.handle(frame(f))).toEqual(NOT_CONNECTED);
    expect(denied).toEqual([]);
    if (f.op === 'call')
      expect(seen).toEqual([
        ['github', 'ok'],
        ['github', 'failed'],
      ]);
  });

  it('is accepted in servers: [...] at the start, and listed by servers() once connected again', async () => {
    const { registry, broker } = setup();
    registry.set(github(false));
    expect(broker.unknownServers(['github', 'nope'], { user: 'alice' })).toEqual(['nope']);
    // Another user may not use it at all: still unknown to them.
    expect(broker.unknownServers(['github'], { user: 'bob' })).toEqual(['github']);
    const run = broker.forRun({ owner: { user: 'alice' }, servers: ['github'] });
    expect(await run.handle(frame({ op: 'servers' }))).toEqual({ ok: true, value: [] });
    registry.set(github(true));
    expect(await run.handle(frame({ op: 'servers' }))).toEqual({ ok: true, value: [{ name: 'github', tools: 1 }] });
  });

  it('counts a call to it against the run’s calls, so a retry loop ends', async () => {
    const { registry, broker } = setup();
    registry.set(github(false));
    const run = broker.forRun({ owner: { user: 'alice' } });
    const kinds: string[] = [];
    for (let i = 0; i <= limits.maxCalls; i++) {
      const a = await run.handle(frame({ op: 'call', server: 'github', tool: 'list_issues', args: {} }));
      kinds.push(a.ok ? 'ok' : a.error.kind);
    }
    expect(kinds).toEqual([...Array<string>(limits.maxCalls).fill('unavailable'), 'limit']);
  });

  it('is still denied to a user who may not use it', async () => {
    const { registry, broker } = setup();
    registry.set(github(false));
    const denied: string[] = [];
    const run = broker.forRun({ owner: { user: 'bob' }, onDenied: (m) => void denied.push(m) });
    expect(await run.handle(frame({ op: 'call', server: 'github', tool: 'list_issues', args: {} }))).toMatchObject({ ok: false, error: { kind: 'denied' } });
    expect(denied).toHaveLength(1);
  });
});
