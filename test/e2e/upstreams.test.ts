// Code mode's upstream servers against a REAL upstream: the reference "everything" MCP server
// (npm) over Streamable HTTP, behind a proxy that requires an API key header. The operator runs in
// this process (startOperator), so the locally spawned upstream is reachable by URL; the
// UpstreamServers, Secrets and tokens live in the test's own namespace.
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { decode } from '@toon-format/toon';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GROUP, UPSTREAMSERVER_PLURAL, VERSION, type UpstreamServerStatus } from '../../src/api/v1alpha1/index.js';
import { createNamespace, deleteNamespace, testKube, until } from './helpers/kube.js';
import { startOperator, type RunningOperator } from './helpers/operator.js';
import { createUpstream as createUpstreamIn, readyOf, upstreamStatus } from './helpers/upstream-servers.js';
import { startEverything, startKeyProxy, type Everything, type KeyProxy } from './helpers/upstream.js';

const k = testKube();
const KEY = `key-${randomBytes(12).toString('hex')}`;
const WRONG_KEY = `wrong-${randomBytes(12).toString('hex')}`;
const alice = randomBytes(16).toString('hex');
const bob = randomBytes(16).toString('hex');
const DENIED = ['get-tiny-image', 'toggle-*'];
const ENV = {
  CODEMODE_AUTH_MODE: 'tokens',
  CODEMODE_AUTH_TOKENS_SECRET: 'team-tokens',
  CODEMODE_UPSTREAM_HEALTH_INTERVAL_SECONDS: '1',
  CODEMODE_UPSTREAM_REQUEST_TIMEOUT_SECONDS: '5',
  // One call at a time per user and upstream: the share test below sees calls wait in line.
  CODEMODE_UPSTREAM_CALLS_PER_USER: '1',
};

let ns: string;
let op: RunningOperator;
/** A second replica, started by the last test. */
let op2: RunningOperator | undefined;
let opStopped = false;
let everything: Everything;
let proxy: KeyProxy;
let logs = '';

async function mcp(token: string): Promise<Client> {
  const client = new Client({ name: 'e2e-upstreams', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  await client.connect(new StreamableHTTPClientTransport(new URL(op.url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
  return client;
}

async function search(token: string, args: Record<string, unknown>): Promise<Array<{ server: string; name: string; signature: string }>> {
  const client = await mcp(token);
  try {
    const r = await client.callTool({ name: 'search_tools', arguments: args });
    expect(r.isError, JSON.stringify(r.content)).toBeFalsy();
    return (r.structuredContent as { results: Array<{ server: string; name: string; signature: string }> }).results;
  } finally {
    await client.close();
  }
}

async function capabilities(token: string): Promise<string> {
  const client = await mcp(token);
  try {
    const r = await client.readResource({ uri: 'codemode://upstreams' });
    return (r.contents[0] as { text: string }).text;
  } finally {
    await client.close();
  }
}

const createUpstream = (name: string, spec: Record<string, unknown>): Promise<void> => createUpstreamIn(k, ns, name, spec);
const statusOf = (name: string): Promise<UpstreamServerStatus | undefined> => upstreamStatus(k, ns, name);
const ready = readyOf;

/** Every tool the upstream lists to a client of its own (with the key). */
async function upstreamTools(): Promise<string[]> {
  const client = new Client({ name: 'e2e-direct', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
  await client.connect(new StreamableHTTPClientTransport(new URL(proxy.url), { requestInit: { headers: { 'X-Api-Key': KEY } } }));
  try {
    return (await client.listTools()).tools.map((t) => t.name);
  } finally {
    await client.close();
  }
}

/** What `everything` should offer: the upstream's tools minus the denied globs. */
async function offeredByUpstream(): Promise<string[]> {
  return (await upstreamTools()).filter((n) => n !== 'get-tiny-image' && !n.startsWith('toggle-'));
}

beforeAll(async () => {
  ns = await createNamespace(k, 'e2e-upstreams');
  everything = await startEverything();
  proxy = await startKeyProxy(everything.port, 'X-Api-Key', KEY);
  await k.core.createNamespacedSecret({
    namespace: ns,
    body: { metadata: { name: 'team-tokens' }, stringData: { 'tokens.csv': `${alice},alice,u1,"dev"\n${bob},bob,u2\n` } },
  });
  await k.core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'upstream-key' }, stringData: { apiKey: KEY } } });
  await k.core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'rotating-key' }, stringData: { apiKey: WRONG_KEY } } });
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb): void {
      logs += chunk.toString();
      cb();
    },
  });
  op = await startOperator(ns, ENV, { logger: pino({ level: 'debug' }, sink), metrics: true });
  const withKey = { headers: [{ name: 'X-Api-Key', secretKeyRef: { name: 'upstream-key', key: 'apiKey' } }] };
  await createUpstream('everything', { url: proxy.url, ...withKey, tools: { deny: DENIED } });
  await createUpstream('nokey', { url: proxy.url });
  await createUpstream('rotating', { url: proxy.url, headers: [{ name: 'X-Api-Key', secretKeyRef: { name: 'rotating-key', key: 'apiKey' } }] });
  await createUpstream('alice-only', { url: proxy.url, ...withKey, access: { users: ['alice'] } });
  await createUpstream('late-secret', { url: proxy.url, headers: [{ name: 'X-Api-Key', secretKeyRef: { name: 'late-key', key: 'apiKey' } }] });
});

afterAll(async () => {
  if (!opStopped) await op?.stop();
  await op2?.stop();
  await proxy?.close();
  await everything?.kill();
  if (ns) await deleteNamespace(k, ns);
});

describe('UpstreamServer against the reference everything server', () => {
  it('becomes Ready with the number of tools the upstream offers after the deny list', async () => {
    await until(async () => ready(await statusOf('everything')).status === 'True', 60_000, 'everything Ready');
    // The everything server registers some tools after initialize and announces them with
    // list_changed: poll until the gateway's count equals what a direct client sees.
    let want: string[] = [];
    await until(
      async () => {
        want = await offeredByUpstream();
        return (await statusOf('everything'))?.toolCount === want.length;
      },
      60_000,
      'toolCount equal to the upstream tools minus denied ones',
    );
    expect(want).toContain('echo');
    const s = await statusOf('everything');
    expect(ready(s).reason).toBe('CatalogLoaded');
    expect(s?.lastRefreshTime).toMatch(/^\d{4}-\d\d-\d\dT/);
  });

  it('sends the Secret header to the upstream: without it Unauthorized, with a rotated Secret Ready', async () => {
    await until(async () => ready(await statusOf('nokey')).reason === 'Unauthorized', 60_000, 'nokey Unauthorized');
    expect((await statusOf('nokey'))?.lastError).toMatch(/401/);
    await until(async () => ready(await statusOf('rotating')).reason === 'Unauthorized', 60_000, 'rotating Unauthorized with the wrong key');
    expect(proxy.refused()).toBeGreaterThan(0);
    const before = proxy.authorized();
    await k.core.replaceNamespacedSecret({ namespace: ns, name: 'rotating-key', body: { metadata: { name: 'rotating-key' }, stringData: { apiKey: KEY } } });
    await until(async () => ready(await statusOf('rotating')).status === 'True', 60_000, 'rotating Ready after the Secret changed');
    expect(proxy.authorized()).toBeGreaterThan(before);
  });

  it('waits in SecretNotFound for a Secret that does not exist yet, and connects once it is created', async () => {
    await until(async () => ready(await statusOf('late-secret')).reason === 'SecretNotFound', 60_000, 'late-secret SecretNotFound');
    expect((await statusOf('late-secret'))?.lastError).toMatch(/Secret late-key does not exist/);
    await k.core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'late-key' }, stringData: { apiKey: KEY } } });
    await until(async () => ready(await statusOf('late-secret')).status === 'True', 60_000, 'late-secret Ready after the Secret was created');
  });

  it('search_tools ranks echo first for "echo a message" and never shows a denied tool', async () => {
    const hits = await search(alice, { query: 'echo a message', limit: 5, servers: ['everything'] });
    expect(hits[0]).toMatchObject({ server: 'everything', name: 'echo' });
    expect(hits[0]?.signature).toBe('(message: string)');
    const image = await search(alice, { query: 'tiny image', servers: ['everything'] });
    expect(image.map((h) => h.name)).not.toContain('get-tiny-image');
    const toggles = await search(alice, { query: 'toggle simulated logging', servers: ['everything'] });
    expect(toggles.filter((h) => h.name.startsWith('toggle-'))).toEqual([]);
  });

  it('writes the results as TOON when asked (a uniform table), decoding to the structured results', async () => {
    const client = await mcp(alice);
    try {
      const r = await client.callTool({ name: 'search_tools', arguments: { query: 'echo a message', limit: 3, servers: ['everything'], format: 'toon' } });
      const text = (r.content as Array<{ text: string }>)[0]?.text ?? '';
      const results = (r.structuredContent as { results: unknown[] }).results;
      expect(text).toMatch(/^\[\d+\]\{server,name,summary,signature,score\}:/);
      expect(decode(text)).toEqual(results);
    } finally {
      await client.close();
    }
  });

  it('shows a user only the upstreams they may use (search and the capability resource)', async () => {
    await until(async () => ready(await statusOf('alice-only')).status === 'True', 60_000, 'alice-only Ready');
    expect((await search(alice, { query: 'echo', servers: ['alice-only'] })).map((h) => h.server)).toContain('alice-only');
    expect(await search(bob, { query: 'echo', servers: ['alice-only'] })).toEqual([]);
    expect((await search(bob, { query: 'echo' })).map((h) => h.server)).not.toContain('alice-only');
    expect(await capabilities(alice)).toMatch(/- alice-only: ready, \d+ tools/);
    const forBob = await capabilities(bob);
    expect(forBob).toMatch(/- everything: ready, \d+ tools/);
    expect(forBob).not.toContain('alice-only');
  });

  it('lets sandbox code call the declared upstreams as its owner, and the Secret header never enters the sandbox', async () => {
    // The whole path: UpstreamServer → the gateway's registry → the broker → the codemode module
    // in a session's kernel. Each user's program sees the upstreams that user may use.
    const code =
      'import os\nfrom codemode import mcp, call_tool, servers, ToolError\n' +
      'names = sorted(s["name"] for s in servers())\n' +
      'try:\n    other = call_tool("alice-only", "echo", {"message": "b"})\nexcept ToolError as e:\n    other = e.kind\n' +
      '(names, mcp.everything.echo(message="from the sandbox"), other, os.environ.get("X_API_KEY"), [v for v in os.environ.values() if "key-" in v])';
    const results: Record<string, unknown> = {};
    for (const [who, token] of [
      ['alice', alice],
      ['bob', bob],
    ] as const) {
      const client = await mcp(token);
      try {
        const created = await client.callTool({ name: 'create_session', arguments: { language: 'python' } });
        const session = (created.structuredContent as { session: string }).session;
        const r = await client.callTool({ name: 'execute_code', arguments: { session, code, timeout_seconds: 60 } });
        expect(r.isError, JSON.stringify(r.content)).toBeFalsy();
        results[who] = (r.structuredContent as { result?: string }).result;
        expect(JSON.stringify(r).includes(KEY)).toBe(false);
        await client.callTool({ name: 'close_session', arguments: { session } });
      } finally {
        await client.close();
      }
    }
    // alice may use alice-only (and the servers every authenticated user may use); bob may not,
    // and for him it is a server that does not exist.
    expect(results.alice).toMatch(/^\(\['alice-only', 'everything', 'late-secret', 'rotating'\], 'Echo: from the sandbox', 'Echo: b', None, \[\]\)$/);
    expect(results.bob).toMatch(/^\(\['everything', 'late-secret', 'rotating'\], 'Echo: from the sandbox', '[a-z_]+', None, \[\]\)$/);
    expect(String(results.bob)).not.toContain('Echo: b');
  }, 180_000);

  it("holds a user to their share of an upstream: alice's parallel calls wait in line, bob's goes past them", async () => {
    const [a, b] = [await mcp(alice), await mcp(bob)];
    const session = async (client: Client): Promise<string> =>
      ((await client.callTool({ name: 'create_session', arguments: { language: 'python' } })).structuredContent as { session: string }).session;
    const gauge = async (name: string): Promise<number> =>
      Number(new RegExp(`^${name}\\{server="everything"\\} (\\d+)$`, 'm').exec((await op.metrics?.registry.metrics()) ?? '')?.[1] ?? -1);
    try {
      const [sa, sb] = [await session(a), await session(b)];
      let aliceDone = false;
      const parallel = a
        .callTool({
          name: 'execute_code',
          arguments: {
            session: sa,
            code: 'import asyncio\nfrom codemode import mcp\nr = await asyncio.gather(*(mcp.everything.trigger_long_running_operation(duration=3, steps=1) for _ in range(3)))\nlen(r)',
            timeout_seconds: 60,
          },
        })
        .finally(() => (aliceDone = true));
      // alice's first call runs, her other two wait for it (the gauges say so) ...
      await until(async () => (await gauge('codemode_upstream_calls_waiting')) === 2, 20_000, "alice's two calls waiting");
      expect(await gauge('codemode_upstream_calls_in_flight')).toBe(1);
      // ... while bob, another user, gets a place at once and is answered before alice's calls end.
      const r = await b.callTool({
        name: 'execute_code',
        arguments: { session: sb, code: 'from codemode import mcp\nmcp.everything.echo(message="past")', timeout_seconds: 60 },
      });
      expect((r.structuredContent as { result?: string }).result).toBe("'Echo: past'");
      expect(aliceDone).toBe(false);
      const done = await parallel;
      expect(done.isError, JSON.stringify(done.content)).toBeFalsy();
      expect(done.structuredContent).toMatchObject({ result: '3', tool_calls: { calls: 3, errors: 0 } });
      expect(await gauge('codemode_upstream_calls_waiting')).toBe(0);
      for (const [client, s] of [
        [a, sa],
        [b, sb],
      ] as const)
        await client.callTool({ name: 'close_session', arguments: { session: s } });
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  }, 180_000);

  it('applies an edited deny list: the tool disappears from search and the count', async () => {
    await k.custom.patchNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: ns,
      plural: UPSTREAMSERVER_PLURAL,
      name: 'alice-only',
      body: [{ op: 'add', path: '/spec/tools', value: { deny: ['echo'] } }],
    });
    await until(
      async () => (await statusOf('alice-only'))?.toolCount === (await upstreamTools()).filter((n) => n !== 'echo').length,
      60_000,
      'alice-only counting every upstream tool but echo',
    );
    expect((await search(alice, { query: 'echo a message', servers: ['alice-only'] })).map((h) => h.name)).not.toContain('echo');
  });

  it('turns not Ready with lastError when the upstream goes away, and Ready again when it is back', async () => {
    await everything.kill();
    await until(
      async () => {
        const s = await statusOf('everything');
        return ready(s).status === 'False' && ready(s).reason === 'Unreachable' && (s?.lastError ?? '') !== '';
      },
      60_000,
      'everything not Ready after the upstream was killed',
    );
    expect(await search(alice, { query: 'echo', servers: ['everything'] })).toEqual([]);
    await everything.restart();
    await until(async () => ready(await statusOf('everything')).status === 'True', 60_000, 'everything Ready again');
    await until(async () => (await search(alice, { query: 'echo a message', servers: ['everything'] }))[0]?.name === 'echo', 30_000, 'echo found again');
  });

  it('serves the upstreams on a second replica too; after the leader stops, the other one writes the status', async () => {
    op2 = await startOperator(ns, ENV, {
      logger: pino({ level: 'debug' }, new Writable({ write: (c: Buffer, _e, cb): void => void ((logs += c.toString()), cb()) })),
    });
    const second = op2;
    await until(
      () => second.operator.upstreams.servers({ user: 'alice' }).some((s) => s.name === 'everything' && s.ready),
      60_000,
      'the second replica connected',
    );
    expect(second.operator.upstreams.search({ user: 'alice' }, 'echo a message', { servers: ['everything'] })[0]?.name).toBe('echo');
    await until(() => op.operator.poolController.isLeader, 60_000, 'the first replica leads');
    expect(second.operator.poolController.isLeader).toBe(false);
    opStopped = true;
    await op.stop();
    await createUpstream('after-failover', { url: proxy.url, headers: [{ name: 'X-Api-Key', secretKeyRef: { name: 'upstream-key', key: 'apiKey' } }] });
    // The Lease must expire first (15 s of the follower's own clock), then it writes.
    await until(async () => ready(await statusOf('after-failover')).status === 'True', 90_000, 'after-failover Ready, written by the new leader');
    expect(second.operator.poolController.isLeader).toBe(true);
  }, 150_000);

  it('never puts a header value into status, Events or logs', async () => {
    const objects = JSON.stringify(await k.custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: UPSTREAMSERVER_PLURAL }));
    const events = JSON.stringify(await k.core.listNamespacedEvent({ namespace: ns }));
    expect(logs).toContain('Upstream MCP server not reachable');
    for (const [what, text] of [
      ['status', objects],
      ['events', events],
      ['logs', logs],
    ] as const) {
      expect(text.includes(KEY), `${what} contains the key`).toBe(false);
      expect(text.includes(WRONG_KEY), `${what} contains the old key`).toBe(false);
    }
  });
});
