// The shipped raw manifests (deploy/, rendered from the chart) with the locally built gateway
// image: the operator runs in-cluster with only its namespaced RBAC in the sandbox namespace,
// becomes Ready, and serves execute_code over MCP.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { KubernetesObjectApi, RbacAuthorizationV1Api, type KubernetesObject } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { deleteNamespace, testKube, until } from './helpers/kube.js';
import { KUBECTL } from './helpers/helm.js';
import { connect } from './helpers/operator.js';

const k = testKube();
const ns = `deploy-${Date.now().toString(36)}`;
const sandboxNs = `${ns}-sbx`;

let forward: ChildProcess | undefined;
let base = '';
// The manifest's CODEMODE_AUTH_MODE=tokens: one user's token in the Secret it names.
const token = `t-${randomBytes(16).toString('hex')}`;

/** The shipped namespaces, mapped to throwaway ones. */
const rename = (n: string | undefined): string | undefined => (n === 'codemode' ? ns : n === 'codemode-sandboxes' ? sandboxNs : n);

type Manifest = KubernetesObject & {
  subjects?: Array<{ namespace?: string }>;
  spec?: { template?: { spec?: { containers?: Array<{ env?: Array<{ name: string; value?: string }> }> } } };
};

/** Cluster-scoped objects of the manifest (the owner policy and its binding), deleted afterwards. */
const CLUSTER_KINDS = ['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding'];
let clusterObjects: KubernetesObject[] = [];

/**
 * The manifest, moved into throwaway namespaces. The owner policy binds the sandbox namespace and
 * exempts the gateway's ServiceAccount by name: both move with it (and its name, cluster-wide).
 */
function manifests(): KubernetesObject[] {
  return parseAllDocuments(readFileSync('deploy/codemode-operator.yaml', 'utf8')).map((d) => {
    if (CLUSTER_KINDS.includes((d.toJS() as Manifest).kind ?? '')) {
      const moved = JSON.stringify(d.toJS())
        .replaceAll('system:serviceaccount:codemode:', `system:serviceaccount:${ns}:`)
        .replaceAll('"kubernetes.io/metadata.name":"codemode-sandboxes"', `"kubernetes.io/metadata.name":"${sandboxNs}"`)
        .replaceAll('codemode-codemode-operator-owner', `${ns}-codemode-operator-owner`);
      return JSON.parse(moved) as KubernetesObject;
    }
    const obj = d.toJS() as Manifest;
    if (obj.kind === 'Namespace') obj.metadata = { ...obj.metadata, name: rename(obj.metadata?.name) };
    else obj.metadata = { ...obj.metadata, namespace: rename(obj.metadata?.namespace) };
    obj.subjects?.forEach((s) => (s.namespace = rename(s.namespace)));
    for (const e of obj.spec?.template?.spec?.containers?.[0]?.env ?? []) if (e.name === 'CODEMODE_NAMESPACE') e.value = rename(e.value);
    return obj;
  });
}

beforeAll(async () => {
  const api = KubernetesObjectApi.makeApiClient(k.kc);
  const objs = manifests();
  for (const obj of objs.filter((o) => o.kind === 'Namespace')) await api.create(obj);
  // The tokens Secret lives in CODEMODE_NAMESPACE, the sandbox namespace.
  await k.core.createNamespacedSecret({
    namespace: sandboxNs,
    body: { metadata: { name: 'codemode-tokens' }, stringData: { 'tokens.csv': `${token},deploy-user,u1,"dev"\n` } },
  });
  clusterObjects = objs.filter((o) => CLUSTER_KINDS.includes(o.kind ?? ''));
  expect(clusterObjects.map((o) => o.metadata?.name)).toEqual([`${ns}-codemode-operator-owner`, `${ns}-codemode-operator-owner`]);
  for (const obj of objs.filter((o) => o.kind !== 'Namespace')) await api.create(obj);
  await until(
    async () => {
      const pods = await k.core.listNamespacedPod({ namespace: ns, labelSelector: 'app.kubernetes.io/name=codemode-operator' });
      return pods.items.some((p) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
    },
    240_000,
    'the operator Deployment to be Ready (readiness waits for the first sandbox self-check)',
  );
  forward = spawn(KUBECTL, ['port-forward', '-n', ns, 'svc/codemode-operator', ':8080'], { env: process.env });
  base = await new Promise<string>((resolve, reject) => {
    forward?.stdout?.on('data', (b: Buffer) => {
      const m = /Forwarding from 127\.0\.0\.1:(\d+)/.exec(b.toString());
      if (m) resolve(`http://127.0.0.1:${m[1]}`);
    });
    forward?.on('exit', (code) => reject(new Error(`kubectl port-forward exited with ${code}`)));
  });
});
afterAll(async () => {
  forward?.kill();
  const api = KubernetesObjectApi.makeApiClient(k.kc);
  for (const obj of clusterObjects.reverse()) await api.delete(obj).catch(() => undefined);
  await deleteNamespace(k, ns);
  await deleteNamespace(k, sandboxNs);
});

describe('deploy/codemode-operator.yaml', () => {
  it('runs sandboxes in the separate, PSA-restricted sandbox namespace', async () => {
    const sbx = await k.core.readNamespace({ name: sandboxNs });
    expect(sbx.metadata?.labels?.['pod-security.kubernetes.io/enforce']).toBe('restricted');
    const roles = await k.kc.makeApiClient(RbacAuthorizationV1Api).listNamespacedRole({ namespace: ns });
    expect(roles.items).toEqual([]);
  });

  it('refuses a caller without a token, with the header that says where to look', async () => {
    const res = await fetch(`${base}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: '{}',
    });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toMatch(/^Bearer resource_metadata=".*\/\.well-known\/oauth-protected-resource\/mcp"/);
  });

  it('serves execute_code from inside the cluster', async () => {
    const client = await connect(`${base}/mcp`, 'current', { authorization: `Bearer ${token}` });
    const r = await client.callTool('execute_code', { code: 'print(6 * 7)' });
    await client.close();
    expect(r.structuredContent).toMatchObject({ phase: 'Succeeded', stdout: '42\n', exit_code: 0 });
  });

  it('exposes Prometheus metrics with closed-set labels', async () => {
    // A run is counted after its reply went out and its status was written: wait for it.
    const finished = /codemode_runs_total\{phase="Succeeded",reason="Succeeded",runtime="python"\} 1/;
    let text = '';
    await until(async () => finished.test((text = await (await fetch(`${base}/metrics`)).text())), 30_000, 'the finished run to be counted in /metrics');
    expect(text).toMatch(/codemode_mcp_tool_calls_total\{tool="execute_code",outcome="ok"\} 1/);
    expect(text).toContain('controller_runtime_reconcile_total');
    expect(text).not.toMatch(/run-[a-z0-9]{10}/);
  });

  it('enforces its owner policy in the sandbox namespace: a kubectl user cannot name someone else', async () => {
    const create = () =>
      k.custom.createNamespacedCustomObject({
        group: 'codemode.dev',
        version: 'v1alpha1',
        namespace: sandboxNs,
        plural: 'sandboxruns',
        body: {
          apiVersion: 'codemode.dev/v1alpha1',
          kind: 'SandboxRun',
          metadata: { generateName: 'forged-' },
          spec: { language: 'python', code: 'print(1)', owner: { user: 'deploy-user' } },
        },
      });
    // The API server enforces a policy once its informer has it (the runs above were the gateway's, which it exempts;
    // last, so that a create accepted before then cannot change what the tests above count).
    let refusal = '';
    await until(
      async () => {
        refusal = await create().then(
          () => '',
          (err: unknown) => String((err as { body?: unknown }).body ?? err),
        );
        return refusal !== '';
      },
      60_000,
      'the owner policy to refuse a forged owner',
    );
    expect(refusal).toMatch(/spec\.owner\.user must be your own user name/);
  });
});
