import { describe, expect, it } from 'vitest';
import { SEARCHES_PER_SECOND, SEARCH_BURST, SEARCH_BURST_MS, SEARCH_MS_PER_SECOND, ToolBroker, type CallOutcome } from '../../../src/codemode/broker.js';
import { rankTools } from '../../../src/codemode/discovery.js';
import type { CallFrame } from '../../../src/codemode/frames.js';
import { registryCaller } from '../../../src/codemode/registry-caller.js';
import { UpstreamError } from '../../../src/upstreams/types.js';
import { ToolFilter } from '../../../src/upstreams/policy.js';
import { Upstreams } from '../../../src/upstreams/registry.js';
import { DEMO_TOOLS, fakeUpstream } from './fake-upstream.js';

const limits = { maxCalls: 3, callTimeoutMs: 200, resultMaxBytes: 500, bytesPerRun: 2000 };
const call = (tool: string, args: Record<string, unknown> = {}, server = 'demo'): CallFrame => ({
  id: '1',
  type: 'call',
  callId: 'c',
  op: 'call',
  server,
  tool,
  args,
});

function broker(extra: Partial<typeof limits> = {}) {
  const up = fakeUpstream();
  const seen: Array<[string, CallOutcome]> = [];
  const b = new ToolBroker(up, { ...limits, ...extra }, { upstreamCall: (s, o) => void seen.push([s, o]) });
  return { up, b, seen };
}

describe('RunCalls', () => {
  it.each([
    ['an ok call', call('get-sum', { a: 1, b: 2 }), {}, { ok: true, value: 3 }, ['demo', 'ok']],
    ['a tool error', call('fail'), {}, { ok: false, error: { kind: 'tool', message: 'it broke' } }, ['demo', 'tool_error']],
    ['an unknown tool', call('nope'), {}, { ok: false, error: { kind: 'denied' } }, ['demo', 'denied']],
    ['a server outside servers', call('echo', { message: 'x' }, 'other'), { servers: ['demo'] }, { ok: false, error: { kind: 'denied' } }, ['', 'denied']],
    ['a made-up server (no label of its own)', call('echo', { message: 'x' }, 'made-up'), {}, { ok: false, error: { kind: 'denied' } }, ['', 'denied']],
    ['bad arguments', call('echo', { message: 1 }), {}, { ok: false, error: { kind: 'invalid' } }, ['demo', 'invalid']],
    ['a slow tool', call('slow', { ms: 5000 }), {}, { ok: false, error: { kind: 'timeout' } }, ['demo', 'timeout']],
    ['a run without time left', call('echo', { message: 'x' }), { deadline: Date.now() - 1 }, { ok: false, error: { kind: 'timeout' } }, ['demo', 'timeout']],
  ])('%s', async (_name, frame, run, answer, metric) => {
    const { b, seen } = broker();
    const r = b.forRun(run);
    expect(await r.handle(frame)).toMatchObject(answer);
    expect(seen).toEqual([metric]);
    expect(r.summary()).toMatchObject({ calls: 1, errors: answer.ok ? 0 : 1 });
  });

  it('stops at the per-run call limit without calling the upstream', async () => {
    const { b, up } = broker();
    const r = b.forRun({});
    for (let i = 0; i < 3; i++) expect(await r.handle(call('echo', { message: 'x' }))).toMatchObject({ ok: true });
    expect(await r.handle(call('echo', { message: 'x' }))).toMatchObject({ ok: false, error: { kind: 'limit' } });
    expect(up.calls).toHaveLength(3);
    expect(r.summary()).toMatchObject({ calls: 4, errors: 1, servers: { demo: { calls: 4, errors: 1 } } });
  });

  // Server names are Kubernetes names: "constructor" is one, and a name of Object.prototype.
  it.each(['constructor', 'demo'])('counts the calls of a server named %s as its own', async (name) => {
    const up = fakeUpstream();
    const b = new ToolBroker({ ...up, servers: () => [{ name, toolCount: 1 }], tools: (s) => (s === name ? up.tools('demo') : undefined) }, limits);
    const r = b.forRun({});
    expect(await r.handle(call('echo', { message: 'x' }, name))).toMatchObject({ ok: true });
    expect(r.summary().servers).toEqual({ [name]: { calls: 1, errors: 0 } });
    expect(Object.hasOwn(Object, 'calls')).toBe(false);
  });

  // Every call a program makes finds its tool, refused ones too (a stream answers ~1,000 a second).
  it.each<[string, CallFrame]>([
    ['an unknown tool', call('nope')],
    ['bad arguments', call('tool_1999', { n: 'x' })],
    ['describe(server, tool) of an unknown tool', { id: '1', type: 'call', callId: 'c', op: 'describe', server: 'demo', tool: 'nope', detail: 'full' }],
  ])('finds the tool of %s without reading the catalog again', async (_name, frame) => {
    let reads = 0;
    const catalog = Array.from({ length: 2_000 }, (_, i) => ({ name: `tool_${i}`, inputSchema: { type: 'object', properties: { n: { type: 'integer' } } } }));
    const tools = new Proxy(catalog, { get: (target, key) => (typeof key === 'string' && /^\d+$/.test(key) && reads++, Reflect.get(target, key)) });
    const b = new ToolBroker({ ...fakeUpstream(), tools: (s) => (s === 'demo' ? tools : undefined) }, { ...limits, maxCalls: 1_000 });
    const r = b.forRun({});
    for (let i = 0; i < 100; i++) expect(await r.handle(frame)).toMatchObject({ ok: false });
    expect(reads).toBeLessThanOrEqual(2_000);
  });

  it('gets the registry’s own catalog array, not a copy', () => {
    const registry = new Upstreams();
    registry.set({
      name: 'demo',
      access: undefined,
      filter: new ToolFilter({}),
      callTimeoutMs: 1_000,
      ready: true,
      reason: 'CatalogLoaded',
      tools: [{ server: 'demo', ...DEMO_TOOLS[0]! }],
    });
    expect(registryCaller(registry).tools('demo')).toBe(registry.catalog(undefined, 'demo'));
  });

  it('cuts a large result and counts bytes against the run', async () => {
    const { b } = broker({ bytesPerRun: 900 });
    const r = b.forRun({});
    const first = await r.handle(call('rows', { n: 100 }));
    expect(first).toMatchObject({ ok: true, cut: expect.stringMatching(/^result cut from/) });
    expect(await r.handle(call('rows', { n: 100 }))).toMatchObject({ ok: false, error: { kind: 'limit' } });
  });

  it('tells of at most 3 denied calls per run (Events), and counts all of them', async () => {
    const { b } = broker({ maxCalls: 100 });
    const told: string[] = [];
    const r = b.forRun({ onDenied: (m) => void told.push(m) });
    for (let i = 0; i < 5; i++) await r.handle(call('nope'));
    expect(told).toHaveLength(3);
    expect(told[0]).toMatch(/no tool "nope"/);
    expect(r.summary()).toMatchObject({ calls: 5, errors: 5 });
  });

  it('abandons pending calls when the run ends', async () => {
    const { b } = broker({ callTimeoutMs: 60_000 });
    const r = b.forRun({});
    const pending = r.handle(call('slow', { ms: 60_000 }));
    r.close();
    expect(await pending).toMatchObject({ ok: false, error: { kind: 'unavailable' } });
  });

  // The end-of-run signal is made by the first upstream call; one that comes after the end must
  // still find it aborted (not wait out its 60 s timeout, which would fail the test by its own).
  it('abandons a call that comes after the run ended', async () => {
    const { b } = broker({ callTimeoutMs: 60_000 });
    const r = b.forRun({});
    expect(r.summary()).toEqual({ calls: 0, errors: 0, upstreamWaitMs: 0, servers: {} });
    r.close();
    expect(await r.handle(call('slow', { ms: 60_000 }))).toMatchObject({ ok: false, error: { kind: 'unavailable' } });
    expect(r.summary()).toMatchObject({ calls: 1, errors: 1 });
  });

  it.each([
    [
      'servers',
      { op: 'servers' },
      [
        { name: 'demo', tools: 5, description: 'A demo server' },
        { name: 'other', tools: 1 },
      ],
    ],
    ['describe by name', { op: 'describe', server: 'other', detail: 'name' }, ['other.echo']],
    [
      'describe a summary',
      { op: 'describe', server: 'demo', tool: 'echo', detail: 'summary' },
      { server: 'demo', tool: 'echo', signature: 'echo(message: string)', summary: 'Echoes the message back.' },
    ],
    ['search', { op: 'search', query: 'add numbers', limit: 2, detail: 'name' }, ['demo.get-sum']],
  ])('answers discovery: %s', async (_name, f, value) => {
    const { b } = broker();
    expect(await b.forRun({}).handle({ id: '1', type: 'call', callId: 'c', ...f } as CallFrame)).toEqual({ ok: true, value });
  });
});

describe('rankTools', () => {
  const catalog = DEMO_TOOLS.map((tool) => ({ server: 'demo', tool }));
  it.each([
    ['a name beats a description', 'echo', ['echo']],
    ['words of the description', 'structured rows', ['rows']],
    ['no match, no hits', 'kubernetes', []],
  ])('%s', (_name, query, expected) => {
    expect(rankTools(query, catalog, 3).map((h) => h.tool)).toEqual(expected);
  });
});

describe('RunCalls over the registry', () => {
  it('tells the program a call timed out waiting in line for its own calls, not at the upstream', async () => {
    const registry = new Upstreams({ perServer: 8, perUser: 1 });
    registry.set({
      name: 'shared',
      access: undefined,
      filter: new ToolFilter({}),
      callTimeoutMs: 60_000,
      ready: true,
      reason: 'CatalogLoaded',
      tools: [{ server: 'shared', name: 'hang', inputSchema: { type: 'object' } }],
      call: () => new Promise(() => undefined),
    });
    const b = new ToolBroker(registryCaller(registry), { ...limits, callTimeoutMs: 100 });
    const r = b.forRun({ owner: { user: 'alice' } });
    const [first, second] = await Promise.all([r.handle(call('hang', {}, 'shared')), r.handle(call('hang', {}, 'shared'))]);
    expect(first).toMatchObject({ ok: false, error: { kind: 'timeout', message: 'shared.hang did not answer within 100 ms' } });
    expect(second).toMatchObject({
      ok: false,
      error: { kind: 'timeout', message: expect.stringMatching(/^The call of shared waited its whole time for a place: at most 1 /) },
    });
  });
});

describe('a run’s searches', () => {
  const search = (query: string): CallFrame => ({ id: '1', type: 'call', callId: 'c', op: 'search', query, limit: 1, detail: 'name' }) as CallFrame;
  it('are answered up to the burst, then at the rate, and refused past it', async () => {
    const { b } = broker({ bytesPerRun: 10_000_000 });
    let t = 0;
    const r = b.forRun({ now: () => t });
    const kinds = async (n: number): Promise<string[]> => {
      const out: string[] = [];
      for (let i = 0; i < n; i++) {
        const a = await r.handle(search(`add ${String(i)}`));
        out.push(a.ok ? 'ok' : a.error.kind);
      }
      return out;
    };
    expect(new Set(await kinds(SEARCH_BURST))).toEqual(new Set(['ok']));
    expect(await kinds(1)).toEqual(['limit']);
    t = 1000; // a second on: SEARCHES_PER_SECOND more
    expect((await kinds(SEARCHES_PER_SECOND + 1)).filter((k) => k === 'ok')).toHaveLength(SEARCHES_PER_SECOND);
    const refused = await r.handle(search('add'));
    expect(refused).toMatchObject({ ok: false, error: { kind: 'limit', message: expect.stringMatching(/searched faster than/) } });
  });

  // The user's budget (all their runs' searches and search_tools together) is the registry's.
  it("are refused as a limit when the user's searches took their share of the gateway's time", async () => {
    const up = {
      ...fakeUpstream(),
      search: (): never => {
        throw new UpstreamError('search_limit', "Your searches took more than 100 ms of the gateway's time a second (after 1000 ms). Retry in 1 s.");
      },
    };
    const r = new ToolBroker(up, { ...limits, bytesPerRun: 10_000_000 }).forRun({});
    expect(await r.handle(search('add'))).toMatchObject({ ok: false, error: { kind: 'limit', message: expect.stringMatching(/^Your searches took/) } });
  });

  it('are answered while the time they took fits the burst and the rate', async () => {
    let t = 0;
    // Each search takes 50 ms (a catalog of 10,000 tools that all match).
    const up = { ...fakeUpstream(), search: () => ((t += 50), []) };
    const r = new ToolBroker(up, { ...limits, bytesPerRun: 10_000_000 }).forRun({ now: () => t });
    const answered = async (n: number): Promise<number> => {
      let ok = 0;
      for (let i = 0; i < n; i++) if ((await r.handle(search('add'))).ok) ok++;
      return ok;
    };
    // n searches fit while 50n <= SEARCH_BURST_MS + SEARCH_MS_PER_SECOND * 50n / 1000.
    const fit = Math.floor(SEARCH_BURST_MS / (50 - (50 * SEARCH_MS_PER_SECOND) / 1000)) + 1;
    expect(await answered(SEARCH_BURST)).toBe(fit);
    expect(await r.handle(search('add'))).toMatchObject({ ok: false, error: { kind: 'limit', message: expect.stringMatching(/ms of the gateway's time/) } });
    t += 10_000; // ten seconds on: ten seconds' time more
    const more = await answered(SEARCH_BURST);
    expect(more).toBeGreaterThanOrEqual((10 * SEARCH_MS_PER_SECOND) / 50);
    // At most one search past what the burst and the rate allow, however many were asked.
    expect(50 * (fit + more)).toBeLessThanOrEqual(SEARCH_BURST_MS + (SEARCH_MS_PER_SECOND * t) / 1000 + 50);
  });
});
