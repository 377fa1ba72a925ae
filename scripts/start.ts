// `npm start`: runs the gateway against the current kube-context, or — when there is none —
// brings up the embedded local test cluster first (test/cluster, needs root). Installs the CRDs
// and the namespace for convenience (in real clusters `helm install` of charts/codemode-operator
// does that), then runs the gateway (dist/src/entry.js) in the foreground.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { createInterface } from 'node:readline';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KubeConfig, KubernetesObjectApi, PatchStrategy, type KubernetesObject } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { CLUSTER_KUBECONFIG } from './cluster-paths.js';
import { startLineFor } from './start-output.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const localKubeconfig = CLUSTER_KUBECONFIG;

function hasKubeContext(): boolean {
  if (process.env.KUBERNETES_SERVICE_HOST) return true;
  const paths = (process.env.KUBECONFIG ?? join(homedir(), '.kube/config')).split(':').filter(Boolean);
  return paths.some((p) => existsSync(p));
}

async function applyManifests(kc: KubeConfig, namespace: string): Promise<void> {
  const api = KubernetesObjectApi.makeApiClient(kc);
  const docs: KubernetesObject[] = [];
  for (const f of readdirSync(join(root, 'crds')).filter((f) => f.endsWith('.yaml'))) {
    for (const d of parseAllDocuments(readFileSync(join(root, 'crds', f), 'utf8'))) docs.push(d.toJS() as KubernetesObject);
  }
  docs.push({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } });
  for (const obj of docs) {
    await api.patch(obj, undefined, undefined, 'codemode-start', true, PatchStrategy.ServerSideApply);
  }
  // The CRD must be served before the operator lists it.
  for (let i = 0; i < 50; i++) {
    try {
      await api.list('codemode.dev/v1alpha1', 'SandboxRun', namespace);
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 200));
    }
  }
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
  await applyManifests(kc, namespace);
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
