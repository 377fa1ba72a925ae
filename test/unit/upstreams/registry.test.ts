import { describe, expect, it } from 'vitest';
import { ToolFilter } from '../../../src/upstreams/policy.js';
import type { CallToolResult } from '@modelcontextprotocol/client';
import { MIN_CALL_TIME_LEFT_MS, Upstreams, type UpstreamEntry } from '../../../src/upstreams/registry.js';
import { UpstreamError, type UpstreamTool } from '../../../src/upstreams/types.js';

const tool = (server: string, name: string): UpstreamTool => ({ server, name, description: `${name} things`, inputSchema: { type: 'object' } });

function entry(name: string, over: Partial<UpstreamEntry> = {}): UpstreamEntry & { calls: Array<[string, number]> } {
  const calls: Array<[string, number]> = [];
  return {
    name,
    access: undefined,
    filter: new ToolFilter({ deny: ['delete_*'] }),
    callTimeoutMs: 60_000,
    ready: true,
    reason: 'CatalogLoaded',
    tools: [tool(name, 'echo'), tool(name, 'get_issue')],
    calls,
    call: async (t, _args, timeoutMs) => {
      calls.push([t, timeoutMs]);
      return { content: [{ type: 'text', text: 'ok' }] };
    },
    ...over,
  };
}

function registry(): { r: Upstreams; open: ReturnType<typeof entry>; team: ReturnType<typeof entry> } {
  const r = new Upstreams();
  const open = entry('open');
  const team = entry('team', { access: { groups: ['dev'] }, callTimeoutMs: 5_000 });
  r.set(open);
  r.set(team);
  r.set(entry('down', { ready: false, reason: 'Unreachable', message: 'fetch failed', tools: [] }));
  return { r, open, team };
}

const alice = { user: 'alice', groups: ['dev'] };
const bob = { user: 'bob' };

async function codeOf(p: Promise<unknown> | (() => unknown)): Promise<string | undefined> {
  try {
    await (typeof p === 'function' ? p() : p);
    return undefined;
  } catch (err) {
    return err instanceof UpstreamError ? err.code : String(err);
  }
}

describe('Upstreams (the registry)', () => {
  it('lists only the servers a caller may use', () => {
    const { r } = registry();
    expect(r.servers(alice).map((s) => s.name)).toEqual(['down', 'open', 'team']);
    expect(r.servers(bob).map((s) => s.name)).toEqual(['down', 'open']);
    expect(r.servers(bob).find((s) => s.name === 'down')).toMatchObject({ ready: false, reason: 'Unreachable', message: 'fetch failed', toolCount: 0 });
  });

  it.each<[string, () => ReturnType<typeof registry>['r'], string]>([
    ['a server the caller may not use looks like none', () => registry().r, 'team'],
    ['a server that does not exist', () => registry().r, 'nope'],
  ])('%s', async (_name, make, server) => {
    expect(await codeOf(make().call(bob, server, 'echo', {}))).toBe('unknown_server');
    expect(await codeOf(() => make().catalog(bob, server))).toBe('unknown_server');
    expect(await codeOf(() => make().describe(bob, server, 'echo', 'name'))).toBe('unknown_server');
  });

  it.each([
    ['denied by the spec', 'open', 'delete_repo', 'tool_denied'],
    ['not in the catalog', 'open', 'nothing', 'unknown_tool'],
    ['server not ready', 'down', 'echo', 'not_ready'],
  ])('refuses a call: %s', async (_name, server, t, code) => {
    expect(await codeOf(registry().r.call(alice, server, t, {}))).toBe(code);
  });

  it('calls with the shorter of the two timeouts', async () => {
    const { r, open, team } = registry();
    await r.call(alice, 'open', 'echo', {}, { timeoutMs: 1_000 });
    await r.call(alice, 'team', 'echo', {}, { timeoutMs: 30_000 });
    await r.call(alice, 'open', 'echo', {});
    expect(open.calls).toEqual([
      ['echo', 1_000],
      ['echo', 60_000],
    ]);
    expect(team.calls).toEqual([['echo', 5_000]]);
  });

  it('holds a user to their share of an upstream: calls past it wait, and the wait counts against the timeout', async () => {
    const r = new Upstreams({ perServer: 4, perUser: 2 });
    const pending: Array<() => void> = [];
    const seen: Array<[string, number]> = [];
    r.set(
      entry('slow', {
        call: (t, _args, timeoutMs) => {
          seen.push([t, timeoutMs]);
          return new Promise((resolve) => pending.push(() => resolve({ content: [] })));
        },
      }),
    );
    const calls = [0, 1, 2].map(() => r.call(alice, 'slow', 'echo', {}, { timeoutMs: 10_000 }));
    const expired = codeOf(r.call(alice, 'slow', 'echo', {}, { timeoutMs: 30 }));
    const other = r.call(bob, 'slow', 'echo', {}, { timeoutMs: 10_000 });
    await new Promise((resolve) => setTimeout(resolve, 60));
    // alice's first two and bob's one reached the upstream; alice's third waits, her fourth timed out waiting.
    expect(seen.map(([, ms]) => ms)).toEqual([10_000, 10_000, 10_000]);
    expect(await expired).toBe('timeout');
    pending.shift()?.();
    await calls[0];
    await new Promise((resolve) => setImmediate(resolve));
    expect(seen).toHaveLength(4);
    expect(seen[3]?.[1]).toBeLessThan(10_000);
    expect(seen[3]?.[1]).toBeGreaterThan(9_000);
    for (const done of pending.splice(0)) done();
    await Promise.all([...calls, other]);
  });

  it('gives the place back when a call that never settles is past its time', async () => {
    const r = new Upstreams({ perServer: 1, perUser: 1 });
    let reached = 0;
    r.set(entry('stuck', { call: () => (reached++ === 0 ? new Promise(() => undefined) : Promise.resolve({ content: [] })) }));
    void r.call(alice, 'stuck', 'echo', {}, { timeoutMs: 20 });
    // Waits behind the stuck call, which keeps its place 1 s past its 20 ms.
    await expect(r.call(bob, 'stuck', 'echo', {}, { timeoutMs: 5_000 })).resolves.toEqual({ content: [] });
    expect(reached).toBe(2);
  });

  // bob's call waits behind alice's, which ends `firstEndsAt` ms into bob's `timeoutMs`.
  it.each<[string, number, number, boolean]>([
    ['a few ms of its time left is not sent, and gives its place back', 280, 300, false],
    ['enough of its time left is sent', 50, 2_000, true],
  ])('a call that waited in line with %s', async (_name, firstEndsAt, timeoutMs, sent) => {
    const r = new Upstreams({ perServer: 1, perUser: 1 });
    const seen: number[] = [];
    const first = (): Promise<CallToolResult> => new Promise((resolve) => setTimeout(() => resolve({ content: [] }), firstEndsAt));
    r.set(entry('line', { call: (_t, _args, ms) => (seen.push(ms), seen.length === 1 ? first() : Promise.resolve({ content: [] })) }));
    const alices = r.call(alice, 'line', 'echo', {}, { timeoutMs: 10_000 });
    const bobs = r.call(bob, 'line', 'echo', {}, { timeoutMs }).then(
      () => 'sent',
      (err: unknown) => (err instanceof UpstreamError ? `${err.code}: ${err.message}` : String(err)),
    );
    await alices;
    if (sent) {
      expect(await bobs).toBe('sent');
      expect(seen[1]).toBeGreaterThanOrEqual(MIN_CALL_TIME_LEFT_MS);
      return;
    }
    expect(await bobs).toMatch(/^timeout: The call of line waited its whole time for a place: at most 1 /);
    expect(seen).toHaveLength(1);
    // Its place was given back: the next call is sent at once.
    await r.call(bob, 'line', 'echo', {}, { timeoutMs: 1_000 });
    expect(seen).toEqual([10_000, 1_000]);
  });

  it('does not call when the signal is already aborted', async () => {
    const { r, open } = registry();
    expect(await codeOf(r.call(alice, 'open', 'echo', {}, { signal: AbortSignal.abort() }))).toBe('aborted');
    expect(open.calls).toEqual([]);
  });

  it('searches only the ready servers a caller may use, and tells listeners of changes', () => {
    const { r } = registry();
    expect(r.search(bob, 'echo').map((h) => h.server)).toEqual(['open']);
    expect(r.search(alice, 'echo').map((h) => h.server)).toEqual(['open', 'team']);
    expect(r.search(alice, 'echo', { servers: ['team'] }).map((h) => h.server)).toEqual(['team']);
    let told = 0;
    r.onChange(() => told++);
    r.delete('open');
    expect(told).toBe(1);
    expect(r.search(alice, 'echo').map((h) => h.server)).toEqual(['team']);
  });

  it('describes a tool at each level', () => {
    const { r } = registry();
    expect(r.describe(alice, 'open', 'echo', 'name')).toEqual({ level: 'name', server: 'open', name: 'echo' });
    expect(r.describe(alice, 'open', 'echo', 'summary')).toMatchObject({ summary: 'echo things', signature: '()' });
  });
});
