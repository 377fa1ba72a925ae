// What one Kubernetes API request costs from this process, three ways, interleaved:
// - client-node as shipped: a fresh KubeConfig + makeApiClient. client-node 2.0.1 builds a new
//   undici Agent — so a new TCP + TLS connection — for every request. The bench's own clients
//   (test/e2e/helpers/kube.ts testKube(), used by the floors) are of this kind.
// - client-node with src/kube/clients.ts reuseConnections (what makeClients, so the operator,
//   does): one dispatcher per cluster and user, connections kept alive.
// - the same GET over one kept-alive node:https connection, without client-node: the floor.
import https from 'node:https';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { reuseConnections } from '../src/kube/clients.js';
import type { TestKube } from '../test/e2e/helpers/kube.js';
import { rounded, summarize, type Summary } from './stats.js';

export interface ApiFloor {
  /** client-node as shipped: a new TCP + TLS connection per request. */
  clientNodeGetMs: Summary;
  /** client-node with reuseConnections, as the operator's clients. */
  reusedClientNodeGetMs: Summary;
  /** One kept-alive HTTPS connection, no client-node. */
  keepAliveGetMs: Summary;
}

function freshCoreApi(reuse: boolean): CoreV1Api {
  const kc = new KubeConfig();
  kc.loadFromDefault();
  if (reuse) reuseConnections(kc);
  return kc.makeApiClient(CoreV1Api);
}

export async function apiRequestFloor(k: TestKube, n: number): Promise<ApiFloor> {
  const server = k.kc.getCurrentCluster()?.server;
  if (!server) throw new Error('The kubeconfig has no current cluster');
  const opts: https.RequestOptions = {};
  await k.kc.applyToHTTPSOptions(opts);
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1, ca: opts.ca, cert: opts.cert, key: opts.key });
  const get = (): Promise<void> =>
    new Promise((resolve, reject) => {
      https
        .get(`${server}/api/v1/namespaces/default`, { agent, headers: opts.headers }, (res) => {
          res.resume();
          res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`HTTP ${res.statusCode}`))));
        })
        .on('error', reject);
    });
  const asShipped = freshCoreApi(false);
  const reused = freshCoreApi(true);
  const samples = { shipped: [] as number[], reused: [] as number[], keepAlive: [] as number[] };
  const timed = async (into: number[], record: boolean, f: () => Promise<unknown>): Promise<void> => {
    const t = performance.now();
    await f();
    if (record) into.push(performance.now() - t);
  };
  try {
    // Interleaved, after one unrecorded round of each (the kept-alive connections are opened there).
    for (let i = 0; i <= n; i++) {
      await timed(samples.shipped, i > 0, () => asShipped.readNamespace({ name: 'default' }));
      await timed(samples.reused, i > 0, () => reused.readNamespace({ name: 'default' }));
      await timed(samples.keepAlive, i > 0, get);
    }
  } finally {
    agent.destroy();
  }
  return {
    clientNodeGetMs: rounded(summarize(samples.shipped)),
    reusedClientNodeGetMs: rounded(summarize(samples.reused)),
    keepAliveGetMs: rounded(summarize(samples.keepAlive)),
  };
}
