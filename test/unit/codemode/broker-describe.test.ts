// describe(server) from sandbox code: a run may ask 1,000 times, so the broker measures and cuts a
// catalog once per version and detail level (shared by runs, never across access), and refuses
// without reading the catalog once the run's bytes are spent. Work is counted as catalog reads.
import { describe, expect, it, vi } from 'vitest';
import { ToolBroker } from '../../../src/codemode/broker.js';
import { DescribedCatalogs, MAX_DESCRIBED_BYTES } from '../../../src/codemode/described.js';
import type { CallAnswer, CallFrame, Detail } from '../../../src/codemode/frames.js';
import { registryCaller } from '../../../src/codemode/registry-caller.js';
import type { ToolInfo, UpstreamCaller } from '../../../src/codemode/types.js';
import { ToolFilter } from '../../../src/upstreams/policy.js';
import { Upstreams, type UpstreamEntry } from '../../../src/upstreams/registry.js';
import type { UpstreamTool } from '../../../src/upstreams/types.js';

const limits = { maxCalls: 3, callTimeoutMs: 200, resultMaxBytes: 2_000, bytesPerRun: 1_000_000 };

const describeFrame = (server: string, detail: Detail = 'full'): CallFrame => ({ id: '1', type: 'call', callId: 'c', op: 'describe', server, detail });
const searchFrame: CallFrame = { id: '1', type: 'call', callId: 'c', op: 'search', query: 'tool', limit: 5, detail: 'summary' };
const serversFrame: CallFrame = { id: '1', type: 'call', callId: 'c', op: 'servers' };

/** A catalog larger than resultMaxBytes, so every describe("big") answer is cut. */
function bigCatalog(tag: string): ToolInfo[] {
  return Array.from({ length: 40 }, (_, i) => ({
    name: `tool_${i}`,
    description: `Tool ${i} of catalog ${tag}. ${'It does a thing. '.repeat(5)}`,
    inputSchema: { type: 'object', properties: { [`param_${tag}`]: { type: 'string', description: 'A parameter.' } } },
  }));
}

/** One server "big"; counts its catalog reads. `versioned`: it offers catalogVersion. */
function bigUpstream(versioned: boolean) {
  let version = 1;
  let catalog = bigCatalog('v1');
  const reads = { n: 0 };
  const up: UpstreamCaller = {
    servers: () => [{ name: 'big', toolCount: catalog.length }],
    tools(server) {
      if (server !== 'big') return undefined;
      reads.n++;
      return catalog.map((t) => ({ ...t }));
    },
    ...(versioned && { catalogVersion: (server: string) => (server === 'big' ? String(version) : undefined) }),
    call: () => Promise.resolve({}),
  };
  const replace = (tag: string) => {
    version++;
    catalog = bigCatalog(tag);
  };
  return { up, reads, replace };
}

const bytesOf = (a: CallAnswer): number => (a.ok ? Buffer.byteLength(JSON.stringify(a.value)) : 0);

describe('describe(server) in the broker', () => {
  it('measures and cuts a catalog once per version and detail level, for all runs', async () => {
    const { up, reads, replace } = bigUpstream(true);
    const b = new ToolBroker(up, limits);
    const first = await b.forRun({}).handle(describeFrame('big'));
    expect(first).toMatchObject({ ok: true, cut: expect.stringMatching(/^result cut from/) });
    for (const run of [b.forRun({}), b.forRun({})]) {
      for (let i = 0; i < 20; i++) expect(await run.handle(describeFrame('big'))).toEqual(first);
    }
    expect(reads.n).toBe(1);

    const names = await b.forRun({}).handle(describeFrame('big', 'name'));
    expect(names).toMatchObject({ ok: true, value: expect.arrayContaining(['big.tool_0']) });
    expect(await b.forRun({}).handle(describeFrame('big', 'name'))).toEqual(names);
    expect(reads.n).toBe(2);

    replace('v2');
    const changed = await b.forRun({}).handle(describeFrame('big'));
    expect(JSON.stringify(changed)).toContain('param_v2');
    expect(JSON.stringify(changed)).not.toContain('param_v1');
    expect(await b.forRun({}).handle(describeFrame('big'))).toEqual(changed);
    expect(reads.n).toBe(3);
  });

  it('refuses a kept answer past the run’s bytes without reading the catalog again', async () => {
    const { up, reads } = bigUpstream(true);
    const size = bytesOf(await new ToolBroker(up, limits).forRun({}).handle(describeFrame('big')));
    reads.n = 0;
    const run = new ToolBroker(up, { ...limits, bytesPerRun: size + size / 2 }).forRun({});
    expect(await run.handle(describeFrame('big'))).toMatchObject({ ok: true });
    for (let i = 0; i < 10; i++) {
      expect(await run.handle(describeFrame('big'))).toMatchObject({
        ok: false,
        error: { kind: 'limit', message: expect.stringContaining(`the next ${size}`) },
      });
    }
    expect(reads.n).toBe(1);
  });

  it('answers nothing, reading no catalog, once a run’s bytes are spent', async () => {
    const { up, reads } = bigUpstream(false);
    const size = bytesOf(await new ToolBroker(up, limits).forRun({}).handle(describeFrame('big')));
    reads.n = 0;
    const run = new ToolBroker(up, { ...limits, bytesPerRun: size }).forRun({});
    expect(await run.handle(describeFrame('big'))).toMatchObject({ ok: true });
    for (const frame of [describeFrame('big'), describeFrame('big', 'name'), searchFrame, serversFrame]) {
      expect(await run.handle(frame)).toMatchObject({ ok: false, error: { kind: 'limit', message: expect.stringContaining(`limit of ${size} per run`) } });
    }
    expect(reads.n).toBe(1);
  });
});

describe('describe(server, tool) and search in the broker', () => {
  /** One server "big" whose one tool has many parameters; counts how often they are listed. */
  function bigTool() {
    const listed = { n: 0 };
    const properties = new Proxy(Object.fromEntries(Array.from({ length: 2_000 }, (_, i) => [`param_${i}`, { type: 'string' }])), {
      ownKeys: (target) => (listed.n++, Reflect.ownKeys(target)),
    });
    const tool: ToolInfo = { name: 'tool_big', description: 'A big tool.', inputSchema: { type: 'object', properties } };
    const up: UpstreamCaller = {
      servers: () => [{ name: 'big', toolCount: 1 }],
      tools: (server) => (server === 'big' ? [{ ...tool }] : undefined),
      catalogVersion: (server) => (server === 'big' ? '1' : undefined),
      call: () => Promise.resolve({}),
    };
    return { up, listed };
  }
  const toolFrame = (detail: Detail): CallFrame => ({ id: '1', type: 'call', callId: 'c', op: 'describe', server: 'big', tool: 'tool_big', detail });

  it.each<[string, (detail: Detail) => CallFrame]>([
    ['describe(server, tool)', toolFrame],
    ['search', (detail) => ({ ...searchFrame, detail })],
  ])('%s reads a tool’s schema once per version and detail level, for all runs', async (_name, frame) => {
    const { up, listed } = bigTool();
    const b = new ToolBroker(up, limits);
    for (const detail of ['summary', 'full'] as const) {
      const first = await b.forRun({}).handle(frame(detail));
      expect(first).toMatchObject({ ok: true, cut: expect.stringMatching(/^result cut from/) });
      const after = listed.n;
      for (const run of [b.forRun({}), b.forRun({})]) {
        for (let i = 0; i < 10; i++) expect(await run.handle(frame(detail))).toEqual(first);
      }
      expect(listed.n).toBe(after);
    }
  });
});

describe('DescribedCatalogs', () => {
  it('keeps at most MAX_DESCRIBED_BYTES of answers, then starts over', () => {
    const kept = new DescribedCatalogs();
    const answer = (bytes: number) => ({ value: null, bytes });
    kept.set('a', '1', 'full', answer(MAX_DESCRIBED_BYTES / 2), 'x');
    kept.set('b', '1', 'full', answer(MAX_DESCRIBED_BYTES / 2));
    expect([kept.get('a', '1', 'full', 'x'), kept.get('b', '1', 'full')]).toEqual([answer(MAX_DESCRIBED_BYTES / 2), answer(MAX_DESCRIBED_BYTES / 2)]);
    kept.set('a', '2', 'name', answer(1));
    expect([kept.get('a', '1', 'full', 'x'), kept.get('a', '2', 'name'), kept.get('b', '1', 'full')]).toEqual([
      undefined,
      answer(1),
      answer(MAX_DESCRIBED_BYTES / 2),
    ]);
    kept.set('c', '1', 'name', answer(MAX_DESCRIBED_BYTES / 2));
    expect([kept.get('a', '2', 'name'), kept.get('b', '1', 'full'), kept.get('c', '1', 'name')]).toEqual([
      undefined,
      undefined,
      answer(MAX_DESCRIBED_BYTES / 2),
    ]);
  });
});

describe('describe(server) over the registry', () => {
  const tools = (names: string[]): UpstreamTool[] =>
    names.map((name) => ({ server: 'team', name, description: `Does ${name}.`, inputSchema: { type: 'object' } }));
  const team = (over: Partial<UpstreamEntry>): UpstreamEntry => ({
    name: 'team',
    access: { groups: ['dev'] },
    filter: new ToolFilter({}),
    callTimeoutMs: 60_000,
    ready: true,
    reason: 'CatalogLoaded',
    tools: tools(['echo', 'get_issue']),
    ...over,
  });
  const alice = { user: 'alice', groups: ['dev'] };
  const bob = { user: 'bob' };

  it('keeps an answer per catalog version, and gives it only to callers who may use the server', async () => {
    const registry = new Upstreams();
    registry.set(team({}));
    const catalog = vi.spyOn(registry, 'catalog');
    const b = new ToolBroker(registryCaller(registry), limits);
    const ask = (owner: typeof alice | typeof bob) => b.forRun({ owner }).handle(describeFrame('team', 'name'));

    const first = await ask(alice);
    expect(first).toEqual({ ok: true, value: ['team.echo', 'team.get_issue'] });
    expect(await ask(alice)).toEqual(first);
    expect(await ask(bob)).toMatchObject({ ok: false, error: { kind: 'denied' } });
    expect(catalog).toHaveBeenCalledTimes(1);

    // The same catalog (an equal copy) now for bob only: the kept answer is his, not alice's.
    registry.set(team({ access: { users: ['bob'] }, tools: tools(['echo', 'get_issue']) }));
    expect(await ask(alice)).toMatchObject({ ok: false, error: { kind: 'denied' } });
    expect(await ask(bob)).toEqual(first);
    expect(catalog).toHaveBeenCalledTimes(1);

    registry.set(team({ access: { users: ['bob'] }, tools: tools(['echo', 'get_issue', 'close_issue']) }));
    expect(await ask(bob)).toEqual({ ok: true, value: ['team.echo', 'team.get_issue', 'team.close_issue'] });
    expect(await ask(bob)).toMatchObject({ ok: true });
    expect(catalog).toHaveBeenCalledTimes(2);
  });
});
