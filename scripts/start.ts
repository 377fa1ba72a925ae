// `npm start`: runs the gateway against the current kube-context, or — when there is none —
// brings up the embedded local test cluster first (test/cluster, needs root). Installs the CRDs
// and the namespace for convenience (in real clusters `helm install` of charts/codemode-operator
// does that), then runs the gateway (dist/src/entry.js) in the foreground.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { createInterface } from 'node:readline';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KubeConfig } from '@kubernetes/client-node';
import { CLUSTER_KUBECONFIG } from './cluster-paths.js';
import { installCrds } from './install-crds.js';
import { startLineFor } from './start-output.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const localKubeconfig = CLUSTER_KUBECONFIG;

function hasKubeContext(): boolean {
  if (process.env.KUBERNETES_SERVICE_HOST) return true;
  const paths = (process.env.KUBECONFIG ?? join(homedir(), '.kube/config')).split(':').filter(Boolean);
  return paths.some((p) => existsSync(p));
}

async function main(): Promise<void> {
  const env = { ...process.env };
  if (!hasKubeContext()) {
    console.error('[start] no kube-context found: starting the embedded local cluster (npm run cluster:up)');
    const up = spawnSync('bash', [join(root, 'test/cluster/up.sh')], { stdio: 'inherit' });
    if (up.status !== 0) process.exit(up.status ?? 1);
    env.KUBECONFIG = localKubeconfig;
    process.env.KUBECONFIG = localKubeconfig;
    env.CODEMODE_NAMESPACE ??= 'codemode';
  }
  const kc = new KubeConfig();
  kc.loadFromDefault();
  const namespace = env.CODEMODE_NAMESPACE ?? 'codemode';
  console.error(`[start] cluster ${kc.getCurrentCluster()?.server ?? '?'}; installing CRDs and namespace ${namespace}`);
  await installCrds(kc, join(root, 'crds'), 'codemode-start', [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } }]);
  // stdout (the JSON log) passes through unchanged; the sandbox check's result is repeated as a
  // plain line on stderr.
  const child = spawn(process.execPath, [join(root, 'dist/src/entry.js')], { stdio: ['inherit', 'pipe', 'inherit'], env });
  createInterface({ input: child.stdout }).on('line', (line) => {
    process.stdout.write(`${line}\n`);
    const summary = startLineFor(line);
    if (summary !== undefined) console.error(summary);
  });
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => child.kill(sig));
  child.on('exit', (code) => process.exit(code ?? 1));
}

main().catch((err: unknown) => {
  console.error(`[start] ${(err as Error).message}`);
  process.exit(1);
});
