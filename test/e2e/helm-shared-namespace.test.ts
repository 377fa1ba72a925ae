// The chart with sandboxes in the release namespace (sandboxNamespace.separate=false), installed in
// the two auth modes whose identities come from outside the chart: kubernetes (TokenReview, the
// chart's ClusterRole) and oidc (a real OpenID provider on this machine, reached through the
// chart's egress rule); `helm test` calls execute_code through the Service with each one's token.
// Helm does not own the namespace, so its post-delete hook must remove what the operator created
// there at run time — the warm pool's pods, SandboxRuns, the deny-all policy, the runtime
// ConfigMap and the leader Lease — and then itself.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNamespace, deleteNamespace, testKube, until } from './helpers/kube.js';
import { CHART, helm, kubectl } from './helpers/helm.js';
import { podReachableAddress, startOpenIdProvider, type OpenIdProvider } from './helpers/openid-provider.js';

const k = testKube();
const release = 'shared';
let ns = '';
let installed = false;
let provider: OpenIdProvider | undefined;
/** The `helm test` pod's token (tests.tokenSecret), and the ServiceAccount of mode kubernetes. */
const TOKEN_SECRET = 'helm-test-token';
const AGENT = 'agent';
const AUDIENCE = 'https://codemode-shared.example/mcp';

async function leftovers(): Promise<string[]> {
  const out = await kubectl(['get', 'pods,sandboxruns,networkpolicies,configmaps,leases,jobs,roles,rolebindings,serviceaccounts', '-n', ns, '-o', 'name']);
  // Kubernetes' own per-namespace objects are not ours, nor is the test's agent.
  return out.split('\n').filter((l) => l !== '' && l !== `serviceaccount/${AGENT}` && !/^(configmap\/kube-root-ca\.crt|serviceaccount\/default)$/.test(l));
}

/** Puts `token` in the Secret the `helm test` pod reads its bearer token from. */
async function testToken(token: string): Promise<void> {
  await k.core.deleteNamespacedSecret({ namespace: ns, name: TOKEN_SECRET }).catch(() => undefined);
  await k.core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: TOKEN_SECRET }, stringData: { token } } });
}

/** `helm test`: its pod exits non-zero unless execute_code printed 1 through the Service. */
async function helmTest(): Promise<void> {
  const out = await helm('test', release, '-n', ns, '--timeout', '5m');
  expect(out).toMatch(/Phase:\s+Succeeded/);
}

beforeAll(async () => {
  ns = await createNamespace(k, 'helm-shared');
  await kubectl(['label', 'namespace', ns, 'pod-security.kubernetes.io/enforce=restricted']);
  await k.core.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name: AGENT } } });
});

afterAll(async () => {
  if (installed) await helm('uninstall', release, '-n', ns, '--wait', '--timeout', '5m').catch(() => undefined);
  if (ns) await deleteNamespace(k, ns);
  await provider?.close();
});

describe('charts/codemode-operator with sandboxes in the release namespace', () => {
  it('installs in auth mode kubernetes: helm test calls execute_code with a ServiceAccount token for its audience', async () => {
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
      '--set',
      'config.authMode=kubernetes',
      '--set',
      `config.authAudience=${AUDIENCE}`,
      '--set',
      `tests.tokenSecret.name=${TOKEN_SECRET}`,
      '--wait',
      '--timeout',
      '8m',
    );
    installed = true;
    const sa = await k.core.createNamespacedServiceAccountToken({
      namespace: ns,
      name: AGENT,
      body: { spec: { audiences: [AUDIENCE], expirationSeconds: 600 } },
    });
    await testToken(sa.status?.token ?? '');
    await helmTest();
  }, 900_000);

  it('switches to auth mode oidc: helm test calls execute_code with the access token of a real OpenID provider', async () => {
    provider = await startOpenIdProvider({ address: await podReachableAddress(k), audiences: [AUDIENCE], clients: ['ci-agent'] });
    // The chart's egress rule for the issuer's port is what lets the gateway fetch its discovery
    // document and keys: the release's NetworkPolicy denies the gateway's other egress.
    await helm(
      'upgrade',
      release,
      CHART,
      '-n',
      ns,
      '--reuse-values',
      '--set',
      'config.authMode=oidc',
      '--set',
      `config.oidcIssuer=${provider.issuer}`,
      '--set',
      `config.oidcAudience=${AUDIENCE}`,
      '--wait',
      '--timeout',
      '5m',
    );
    // The ServiceAccount token of mode kubernetes is still the test pod's: refused now. (A failed
    // test pod stays for its logs; the next `helm test` replaces it.)
    await expect(helm('test', release, '-n', ns, '--timeout', '5m')).rejects.toThrow(/failed/);
    expect(await kubectl(['logs', '-n', ns, `${release}-codemode-operator-test`])).toMatch(/initialize: HTTP 401/);
    await testToken(await provider.token('ci-agent'));
    await helmTest();
  }, 900_000);

  it('cleans up after the operator on uninstall', async () => {
    expect(installed).toBe(true);
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

    // A failed `helm test` pod stays until the next test run (helm's hook policy), not the operator's.
    await k.core.deleteNamespacedPod({ namespace: ns, name: `${release}-codemode-operator-test` }).catch(() => undefined);
    await helm('uninstall', release, '-n', ns, '--wait', '--timeout', '8m');
    installed = false;
    await until(async () => (await leftovers()).length === 0, 120_000, `nothing left in ${ns}`).catch(async (err: unknown) => {
      throw new Error(`${(err as Error).message}: ${(await leftovers()).join(', ')}`);
    });
    expect(await leftovers()).toEqual([]);
  }, 900_000);
});
