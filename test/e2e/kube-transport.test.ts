// The gateway's API transport as deployed: the entry point's hook (src/kube/slim-load.ts) gives
// client-node Node's own undici (src/kube/node-undici.ts) instead of the npm package. Each case is
// a fresh process with the hook, talking to the real API server: requests, a watch and its event,
// with the kubeconfig's TLS material honoured (another CA is refused), and a cluster behind an
// HTTP proxy (the package's ProxyAgent and fetch, loaded on first use, through a real CONNECT proxy),
// and a gateway started with NODE_USE_ENV_PROXY=1 (for upstream MCP servers): its API requests,
// watches and exec streams still go straight to the API server.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { connect as netConnect, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rootCertificates } from 'node:tls';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNamespace, deleteNamespace, runPod, simplePod, testKube } from './helpers/kube.js';

const ROOT = join(import.meta.dirname, '../..');
const k = testKube();
let ns = '';
let dir = '';

beforeAll(async () => {
  ns = await createNamespace(k, 'kube-transport');
  dir = await mkdtemp(join(tmpdir(), 'kube-transport-'));
});
afterAll(async () => {
  if (ns) await deleteNamespace(k, ns);
  if (dir) await rm(dir, { recursive: true, force: true });
});

interface Outcome {
  ok: boolean;
  error?: string;
  /** ConfigMaps listed after the create. */
  listed?: number;
  /** What `echo exec` printed through the exec API, when a pod was named. */
  exec?: string;
  /** Files of the npm undici package the process loaded. */
  undiciPackageFiles: number;
}

/**
 * In a fresh process with the gateway's hook: a watch on the namespace's ConfigMaps, a create, the
 * watch's ADDED event for it, a list; prints what happened and how many npm undici files loaded.
 */
async function transport(kubeconfig: Record<string, unknown>, opts: { env?: Record<string, string>; execPod?: string } = {}): Promise<Outcome> {
  const file = join(dir, `${randomBytes(4).toString('hex')}.json`);
  await writeFile(file, JSON.stringify(kubeconfig));
  const name = `t-${randomBytes(3).toString('hex')}`;
  const script = `
    import { createRequire, registerHooks } from 'node:module';
    const { loadOnlyUsedClientNode } = await import('./src/kube/slim-load.ts');
    loadOnlyUsedClientNode();
    const undici = new Set();
    registerHooks({ load(url, ctx, next) { if (url.includes('/node_modules/undici/')) undici.add(url); return next(url, ctx); } });
    const { loadKubeConfig, makeClients } = await import('./src/kube/clients.ts');
    const { Watch } = await import('@kubernetes/client-node/dist/watch.js');
    const kc = loadKubeConfig();
    const clients = makeClients(kc);
    const ns = ${JSON.stringify(ns)};
    const name = ${JSON.stringify(name)};
    // ES modules through the hook, CommonJS ones (a require) in the require cache.
    const loaded = () => new Set([...undici, ...Object.keys(createRequire(import.meta.url).cache).filter((f) => f.includes('/node_modules/undici/'))]).size;
    const out = (o) => console.log(JSON.stringify({ ...o, undiciPackageFiles: loaded() }));
    try {
      let added;
      const event = new Promise((resolve, reject) => { added = resolve; setTimeout(() => reject(new Error('no ADDED event within 20 s')), 20_000).unref(); });
      const watch = await new Watch(kc).watch('/api/v1/namespaces/' + ns + '/configmaps', {}, (type, obj) => { if (type === 'ADDED' && obj.metadata.name === name) added(); }, () => {});
      await clients.core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name }, data: { a: 'b' } } });
      await event;
      watch.abort();
      const list = await clients.core.listNamespacedConfigMap({ namespace: ns });
      const execPod = ${JSON.stringify(opts.execPod ?? '')};
      let exec;
      if (execPod) {
        const { Writable } = await import('node:stream');
        let text = '';
        const sink = new Writable({ write(chunk, _e, cb) { text += chunk.toString(); cb(); } });
        await new Promise((resolve, reject) => {
          clients.exec.exec(ns, execPod, 'main', ['echo', 'exec'], sink, null, null, false, () => resolve()).catch(reject);
        });
        exec = text.trim();
      }
      out({ ok: true, listed: list.items.filter((c) => c.metadata.name === name).length, exec });
    } catch (err) {
      out({ ok: false, error: String(err?.cause?.code ?? err?.cause?.message ?? err?.message ?? err) });
    }
    process.exit(0);
  `;
  const tsx = join(ROOT, 'node_modules/tsx/dist/cli.mjs');
  const { stdout } = await promisify(execFile)(process.execPath, [tsx, '--input-type=module', '-e', script], {
    cwd: ROOT,
    timeout: 60_000,
    env: { ...process.env, KUBECONFIG: file, ...opts.env },
  });
  return JSON.parse(stdout.trim().split('\n').pop() ?? '{}') as Outcome;
}

/** The test cluster's kubeconfig with `edit` applied to its current cluster. */
function kubeconfig(edit: (cluster: Record<string, unknown>) => void): Record<string, unknown> {
  const config = JSON.parse(k.kc.exportConfig()) as { clusters: Array<{ name: string; cluster: Record<string, unknown> }> };
  const current = k.kc.getCurrentCluster()?.name;
  for (const c of config.clusters) if (c.name === current) edit(c.cluster);
  return config;
}

/** A real HTTP CONNECT proxy: tunnels to the requested host:port and counts the tunnels. */
function connectProxy(): Promise<{ server: Server; url: string; tunnels: string[] }> {
  const tunnels: string[] = [];
  const server = createServer((_req, res) => res.writeHead(405).end());
  server.on('connect', (req, client, head) => {
    const [host, port] = (req.url ?? '').split(':');
    tunnels.push(req.url ?? '');
    const upstream = netConnect(Number(port), host ?? '', () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, tunnels })),
  );
}

describe("the gateway's API transport (Node's undici) against the real API server", { timeout: 120_000 }, () => {
  it('requests and a watch work, without loading the npm undici package', async () => {
    const r = await transport(kubeconfig(() => {}));
    expect(r).toEqual({ ok: true, listed: 1, undiciPackageFiles: 0 });
  });

  it("honours the kubeconfig's CA: a server certificate another CA did not sign is refused", async () => {
    const other = rootCertificates[0] ?? '';
    expect(other).toContain('BEGIN CERTIFICATE');
    const r = await transport(
      kubeconfig((c) => {
        delete c['certificate-authority'];
        c['certificate-authority-data'] = Buffer.from(other).toString('base64');
      }),
    );
    expect(r.ok).toBe(false);
    expect(r.error).toMatch(/CERT|certificate|SELF_SIGNED|verify/i);
  });

  it('reaches a cluster behind an HTTP proxy (proxy-url) through the package, loaded on first use', async () => {
    const proxy = await connectProxy();
    try {
      const r = await transport(kubeconfig((c) => (c['proxy-url'] = proxy.url)));
      expect(r).toMatchObject({ ok: true, listed: 1 });
      expect(r.undiciPackageFiles).toBeGreaterThan(0);
      const api = new URL(k.kc.getCurrentCluster()?.server ?? '');
      expect(proxy.tunnels).toContain(`${api.hostname}:${api.port || '443'}`);
    } finally {
      proxy.server.close();
    }
  });

  it('a gateway started with NODE_USE_ENV_PROXY=1: API requests, a watch and an exec stream bypass the proxy of the environment', async () => {
    const pod = await runPod(k, ns, simplePod('exec-target', ['sleep', '3600']));
    const proxy = await connectProxy();
    try {
      const env = { NODE_USE_ENV_PROXY: '1', HTTP_PROXY: proxy.url, HTTPS_PROXY: proxy.url, NO_PROXY: '' };
      const r = await transport(
        kubeconfig(() => {}),
        { env, execPod: pod.metadata?.name ?? '' },
      );
      expect(r).toMatchObject({ ok: true, listed: 1, exec: 'exec' });
      // The environment's proxy is for upstream MCP servers (src/upstreams/http-pool.ts): nothing
      // of the API traffic went through it, nor would it have had to (the kubeconfig names none).
      expect(proxy.tunnels).toEqual([]);
    } finally {
      proxy.server.close();
    }
  });
});
