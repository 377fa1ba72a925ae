// What one Kubernetes API request costs from this process: through client-node (which, in 2.0.1,
// builds a new undici Agent — so a new TCP + TLS connection — for every request), and the same
// GET over one kept-alive HTTPS connection.
import https from 'node:https';
import type { TestKube } from '../test/e2e/helpers/kube.js';
import { rounded, summarize, type Summary } from './stats.js';

export interface ApiFloor {
  clientNodeGetMs: Summary;
  keepAliveGetMs: Summary;
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
        .get(`${server}/api/v1/namespaces/default`, { agent }, (res) => {
          res.resume();
          res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`HTTP ${res.statusCode}`))));
        })
        .on('error', reject);
    });
  const viaClient: number[] = [];
  const viaKeepAlive: number[] = [];
  try {
    // Interleaved, after one unrecorded round of each (the kept-alive connection is opened there).
    for (let i = 0; i <= n; i++) {
      let t = performance.now();
      await k.core.readNamespace({ name: 'default' });
      if (i > 0) viaClient.push(performance.now() - t);
      t = performance.now();
      await get();
      if (i > 0) viaKeepAlive.push(performance.now() - t);
    }
  } finally {
    agent.destroy();
  }
  return { clientNodeGetMs: rounded(summarize(viaClient)), keepAliveGetMs: rounded(summarize(viaKeepAlive)) };
}
