// The chart with sandboxes in the release namespace (sandboxNamespace.separate=false): Helm does
// not own that namespace, so its post-delete hook must remove what the operator created there at
// run time — the warm pool's pods, SandboxRuns, the deny-all policy, the runtime ConfigMap and
// the leader Lease — and then itself.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNamespace, deleteNamespace, testKube, until } from './helpers/kube.js';
import { CHART, helm, kubectl } from './helpers/helm.js';

const k = testKube();
const release = 'shared';
let ns = '';
let installed = false;

async function leftovers(): Promise<string[]> {
  const out = await kubectl(['get', 'pods,sandboxruns,networkpolicies,configmaps,leases,jobs,roles,rolebindings,serviceaccounts', '-n', ns, '-o', 'name']);
  // Kubernetes' own per-namespace objects are not ours.
  return out.split('\n').filter((l) => l !== '' && !/^(configmap\/kube-root-ca\.crt|serviceaccount\/default)$/.test(l));
}

beforeAll(async () => {
  ns = await createNamespace(k, 'helm-shared');
  await kubectl(['label', 'namespace', ns, 'pod-security.kubernetes.io/enforce=restricted']);
});

afterAll(async () => {
  if (installed) await helm('uninstall', release, '-n', ns, '--wait', '--timeout', '5m').catch(() => undefined);
  if (ns) await deleteNamespace(k, ns);
});

describe('charts/codemode-operator with sandboxes in the release namespace', () => {
  it('runs the operator there and cleans up after it on uninstall', async () => {
    await helm(
      'install',
      release,
      CHART,
      '-n',
      ns,
      '--set',
      'sandboxNamespace.separate=false',
      '--set',
      'replicaCount=1',
      '--set',
      'image.pullPolicy=Never',
      '--set',
      'config.warmPoolSize=1',
      '--set',
      'resources.requests.cpu=10m',
      '--set',
      'config.cpuRequest=10m',
      '--wait',
      '--timeout',
      '8m',
    );
    installed = true;
    // What the operator creates at run time, which Helm does not know about.
    // The runtime ConfigMap is content-addressed: codemode-runtime-<hash of its files>.
    const created = [
      'networkpolicy.networking.k8s.io/codemode-sandbox-deny-all',
      'configmap/codemode-runtime-',
      'lease.coordination.k8s.io/codemode-operator-leader',
      // Each replica's liveness Lease (src/controller/replica-liveness.ts): the chart's Role lets it.
      'lease.coordination.k8s.io/codemode-replica-',
    ];
    await until(
      async () => {
        const names = await leftovers();
        const pool = await k.core.listNamespacedPod({ namespace: ns, labelSelector: 'codemode.dev/sandbox=true' });
        return created.every((c) => names.some((n) => n.startsWith(c))) && pool.items.length > 0;
      },
      180_000,
      'the operator to create its policy, ConfigMap, Leases and a warm pool pod',
    );

    await helm('uninstall', release, '-n', ns, '--wait', '--timeout', '8m');
    installed = false;
    await until(async () => (await leftovers()).length === 0, 120_000, `nothing left in ${ns}`).catch(async (err: unknown) => {
      throw new Error(`${(err as Error).message}: ${(await leftovers()).join(', ')}`);
    });
    expect(await leftovers()).toEqual([]);
  }, 900_000);
});
