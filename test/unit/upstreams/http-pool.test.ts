// An upstream client's connections (src/upstreams/http-pool.ts): each pool opens its own, closing
// one ends its connections and no other pool's, and a gateway started with NODE_USE_ENV_PROXY=1
// sends upstream requests through the proxy its environment names, as Node's global fetch does.
import { execFile } from 'node:child_process';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newHttpPool } from '../../../src/upstreams/http-pool.js';

const ROOT = join(import.meta.dirname, '../../..');

interface Recorder {
  server: Server;
  url: string;
  /** Per request: its target and socket (a tunnelled request's too). */
  requests: { target: string; socket: Socket }[];
  /** The authority of each CONNECT (undici's proxy agent tunnels plain HTTP too). */
  tunnels: string[];
}

async function recorder(answer: string): Promise<Recorder> {
  const requests: Recorder['requests'] = [];
  const server = createServer((req: IncomingMessage, res) => {
    requests.push({ target: req.url ?? '', socket: req.socket });
    res.end(answer);
  });
  const tunnels: string[] = [];
  // As a proxy: accept the tunnel and answer the request inside it as any other.
  server.on('connect', (req: IncomingMessage, socket: Socket) => {
    tunnels.push(req.url ?? '');
    socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    server.emit('connection', socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${String((server.address() as AddressInfo).port)}`, requests, tunnels };
}

describe('a pool of its own per connect try', () => {
  let upstream: Recorder;
  beforeAll(async () => {
    upstream = await recorder('upstream');
  });
  afterAll(() => upstream.server.close());

  it('keeps its connection across requests, never shares it with another pool, and close() ends it', async () => {
    const a = newHttpPool();
    const b = newHttpPool();
    for (const pool of [a, b, a, b]) expect(await (await pool.fetch(`${upstream.url}/mcp`)).text()).toBe('upstream');
    const [a1, b1, a2, b2] = upstream.requests.map((r) => r.socket);
    expect(a1).toBe(a2);
    expect(b1).toBe(b2);
    expect(a1).not.toBe(b1);
    const closed = new Promise<void>((resolve) => a1?.once('close', () => resolve()));
    a.close();
    await closed;
    expect(b1?.destroyed).toBe(false);
    b.close();
  });

  it('a closed pool sends nothing more', async () => {
    const pool = newHttpPool();
    pool.close();
    const before = upstream.requests.length;
    await expect(pool.fetch(`${upstream.url}/mcp`)).rejects.toThrow();
    expect(upstream.requests.length).toBe(before);
  });
});

/** Runs `script` (an ES module, in the checkout's root) in a fresh Node process with `env`; its last line of output. */
async function runInProcess(script: string, env: Record<string, string> = {}): Promise<string> {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(https?_proxy|no_proxy|all_proxy|node_use_env_proxy)$/i.test(k)));
  const tsx = join(ROOT, 'node_modules/tsx/dist/cli.mjs');
  const { stdout } = await promisify(execFile)(process.execPath, [tsx, '--input-type=module', '-e', script], {
    cwd: ROOT,
    timeout: 30_000,
    env: { ...clean, ...env },
  });
  return stdout.trim().split('\n').pop() ?? '';
}

// A process that loads the npm undici before Node's fetch is first used (client-node imported
// directly: the tests, the bench) has that package's dispatcher as its global one. Pools fell back
// to it there, so every try shared its kept-alive connections (a failed try's included).
describe('a pool of its own where the global dispatcher is the npm undici package’s', { timeout: 60_000 }, () => {
  let upstream: Recorder;
  beforeAll(async () => {
    upstream = await recorder('upstream');
  });
  afterAll(() => upstream.server.close());

  it('still opens connections of its own, which no other pool uses', async () => {
    const script = `
      import { createRequire } from 'node:module';
      createRequire(import.meta.resolve('@kubernetes/client-node/package.json'))('undici');
      const { nodeAgentClass } = await import('./src/kube/node-undici.ts');
      const { newHttpPool } = await import('./src/upstreams/http-pool.ts');
      const a = newHttpPool();
      const b = newHttpPool();
      const ORDER = [a, a, b, b, a, b];
      const bodies = [];
      for (const pool of ORDER) bodies.push(await (await pool.fetch(process.env.UPSTREAM + '/mcp')).text());
      a.close();
      b.close();
      console.log(JSON.stringify({ nodeAgent: nodeAgentClass() !== undefined, bodies }));
    `;
    const before = upstream.requests.length;
    const out = JSON.parse(await runInProcess(script, { UPSTREAM: upstream.url })) as { nodeAgent: boolean; bodies: string[] };
    // The case this is about: the package's dispatcher is the global one in that process.
    expect(out).toEqual({ nodeAgent: false, bodies: Array(6).fill('upstream') });
    // Which connections each pool's requests came on (the global dispatcher alternated two, each
    // request of either pool taking the other one than the request before).
    const sockets = upstream.requests.slice(before).map((r) => r.socket);
    const of = (pool: 'a' | 'b'): Set<Socket> => new Set(sockets.filter((_, i) => 'aabbab'[i] === pool));
    expect([...of('a')].filter((s) => of('b').has(s))).toEqual([]);
  });
});

describe('the proxy of the environment (a gateway process of its own)', { timeout: 60_000 }, () => {
  let proxy: Recorder;
  let direct: Recorder;
  beforeAll(async () => {
    proxy = await recorder('via proxy');
    direct = await recorder('direct');
  });
  afterAll(() => {
    proxy.server.close();
    direct.server.close();
  });

  /** Fetches `url` with a new pool in a fresh Node process with `env`; the answer's body. */
  async function fetchInProcess(url: string, env: Record<string, string>): Promise<string> {
    const script = `
      const { newHttpPool } = await import('./src/upstreams/http-pool.ts');
      const pool = newHttpPool();
      const res = await pool.fetch(${JSON.stringify(url)});
      console.log(JSON.stringify(await res.text()));
      pool.close();
    `;
    return JSON.parse((await runInProcess(script, env)) || 'null') as string;
  }

  it.each<[string, (p: Recorder, d: Recorder) => Record<string, string>, string, 'proxy' | 'direct']>([
    ['NODE_USE_ENV_PROXY=1 and HTTP_PROXY: through the proxy', (p) => ({ NODE_USE_ENV_PROXY: '1', HTTP_PROXY: p.url }), 'http://upstream.invalid/mcp', 'proxy'],
    [
      'NODE_USE_ENV_PROXY=1, the host in NO_PROXY: direct',
      (p) => ({ NODE_USE_ENV_PROXY: '1', HTTP_PROXY: p.url, NO_PROXY: '127.0.0.1' }),
      'DIRECT/mcp',
      'direct',
    ],
    ['HTTP_PROXY without NODE_USE_ENV_PROXY: direct, as Node’s fetch', (p) => ({ HTTP_PROXY: p.url }), 'DIRECT/mcp', 'direct'],
  ])('%s', async (_name, env, target, via) => {
    const url = target.replace('DIRECT', direct.url);
    const [p, d] = [proxy.tunnels.length, direct.requests.length];
    const body = await fetchInProcess(url, env(proxy, direct));
    expect(body).toBe(via === 'proxy' ? 'via proxy' : 'direct');
    expect(proxy.tunnels.slice(p)).toEqual(via === 'proxy' ? ['upstream.invalid:80'] : []);
    expect(direct.requests.length - d).toBe(via === 'direct' ? 1 : 0);
  });
});
