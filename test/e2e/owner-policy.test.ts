// The chart's ValidatingAdmissionPolicy (templates/owner-policy.yaml, in deploy/ too) on the real API server:
// a run created with kubectl is attributed to its creator, a forged owner is refused, and only the
// gateway's ServiceAccount may record someone else.
import { spawnSync } from 'node:child_process';
import { KubernetesObjectApi, type KubernetesObject } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { createNamespace, deleteNamespace, testKube, until } from './helpers/kube.js';
import { CHART, KUBECTL, helm } from './helpers/helm.js';

const k = testKube();

let ns = '';
let policies: KubernetesObject[] = [];
let n = 0;

/** kubectl create as `user` (impersonation); the API server's answer. */
function createAs(user: string, groups: string[], spec: Record<string, unknown>, kind = 'SandboxRun'): { ok: boolean; out: string } {
  const name = `r${++n}`;
  const body = JSON.stringify({ apiVersion: 'codemode.dev/v1alpha1', kind, metadata: { name, namespace: ns }, spec });
  const r = spawnSync(KUBECTL, ['create', '-f', '-', '-o', 'name', '--as', user, ...groups.flatMap((g) => ['--as-group', g])], {
    input: body,
    env: process.env,
    encoding: 'utf8',
  });
  return { ok: r.status === 0, out: `${r.stdout}${r.stderr}` };
}

const run = (owner?: Record<string, unknown>): Record<string, unknown> => ({ language: 'python', code: 'print(1)', ...(owner && { owner }) });

beforeAll(async () => {
  ns = await createNamespace(k, 'owner');
  const api = KubernetesObjectApi.makeApiClient(k.kc);
  // RBAC lets alice and the "gateway" use SandboxRuns here; the policy decides on the owner.
  await api.create({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { name: 'runs', namespace: ns },
    rules: [{ apiGroups: ['codemode.dev'], resources: ['sandboxruns', 'sandboxsessions'], verbs: ['create', 'get', 'list', 'patch'] }],
  } as KubernetesObject);
  await api.create({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'runs', namespace: ns },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'runs' },
    subjects: [
      { kind: 'User', apiGroup: 'rbac.authorization.k8s.io', name: 'alice' },
      { kind: 'ServiceAccount', name: 'gw', namespace: ns },
    ],
  } as KubernetesObject);
  // The chart's policy (as shipped in deploy/codemode-operator.yaml too), for a release in this
  // namespace whose gateway ServiceAccount is "gw" and whose sandboxes run here.
  const rendered = await helm(
    'template',
    'cm',
    CHART,
    '-n',
    ns,
    '--set',
    'serviceAccount.name=gw',
    '--set',
    'sandboxNamespace.separate=false',
    '--show-only',
    'templates/owner-policy.yaml',
  );
  policies = parseAllDocuments(rendered).map((d) => d.toJS() as KubernetesObject);
  expect(policies.map((p) => p.kind)).toEqual(['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding']);
  for (const p of policies) await api.create(p);
  // The API server enforces a new policy after its informer saw it.
  await until(() => /spec\.owner/.test(createAs('alice', ['dev'], run({ user: 'bob' })).out), 60_000, 'the policy to be enforced');
}, 120_000);
afterAll(async () => {
  const api = KubernetesObjectApi.makeApiClient(k.kc);
  for (const p of policies.reverse()) await api.delete(p).catch(() => undefined);
  await deleteNamespace(k, ns);
});

describe('owner admission policy', () => {
  it('accepts a run that names its creator, who is then shown as its owner', async () => {
    const r = createAs('alice', ['dev'], run({ user: 'alice', groups: ['dev'] }));
    expect(r.ok, r.out).toBe(true);
    const name = r.out.trim().split('/').pop() ?? '';
    const table = spawnSync(KUBECTL, ['get', 'sbr', name, '-n', ns], { env: process.env, encoding: 'utf8' }).stdout;
    expect(table).toMatch(/OWNER/);
    expect(table).toMatch(/alice/);
  });

  it.each([
    ['someone else as owner', run({ user: 'bob' }), /spec\.owner\.user must be your own user name: set it to alice/],
    ['no owner', run(), /set it to alice/],
    ['a group she is not in', run({ user: 'alice', groups: ['admins'] }), /only groups you are in/],
  ])('refuses %s', (_n, spec, message) => {
    const r = createAs('alice', ['dev'], spec);
    expect(r.ok).toBe(false);
    expect(r.out).toMatch(message);
  });

  it('applies to sessions too', () => {
    const r = createAs('alice', ['dev'], { language: 'python', owner: { user: 'bob' } }, 'SandboxSession');
    expect(r.ok).toBe(false);
    expect(r.out).toMatch(/set it to alice/);
  });

  it("lets the gateway's ServiceAccount record the user it authenticated", () => {
    const r = createAs(`system:serviceaccount:${ns}:gw`, ['system:serviceaccounts'], run({ user: 'carol', groups: ['team'] }));
    expect(r.ok, r.out).toBe(true);
  });

  it('refuses to change an owner later', () => {
    const created = createAs('alice', ['dev'], run({ user: 'alice' }));
    expect(created.ok, created.out).toBe(true);
    const name = created.out.trim().split('/').pop() ?? '';
    const patch = spawnSync(
      KUBECTL,
      ['patch', 'sbr', name, '-n', ns, '--type=merge', '-p', '{"spec":{"owner":{"user":"mallory"}}}', '--as', 'alice', '--as-group', 'dev'],
      { env: process.env, encoding: 'utf8' },
    );
    expect(patch.status).not.toBe(0);
    expect(`${patch.stdout}${patch.stderr}`).toMatch(/spec\.owner cannot be changed/);
  });
});
