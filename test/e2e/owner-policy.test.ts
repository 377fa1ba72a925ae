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

const GW = (): string => `system:serviceaccount:${ns}:gw`;

/** kubectl patch (merge) as `user`; the API server's answer. */
function patchAs(user: string, resource: string, name: string, patch: unknown, subresource?: string): { ok: boolean; out: string } {
  const args = ['patch', resource, name, '-n', ns, '--type=merge', '-p', JSON.stringify(patch), '--as', user, '--as-group', 'dev'];
  const r = spawnSync(KUBECTL, [...args, ...(subresource ? ['--subresource', subresource] : [])], { env: process.env, encoding: 'utf8' });
  return { ok: r.status === 0, out: `${r.stdout}${r.stderr}` };
}

/** kubectl delete (or label) as `user` in `groups`; the API server's answer. */
function kubectlAs(user: string, groups: string[], ...args: string[]): { ok: boolean; out: string } {
  const r = spawnSync(KUBECTL, [...args, '-n', ns, '--as', user, ...groups.flatMap((g) => ['--as-group', g])], { env: process.env, encoding: 'utf8' });
  return { ok: r.status === 0, out: `${r.stdout}${r.stderr}` };
}

/** The name kubectl create -o name printed. */
const nameOf = (r: { out: string }): string => r.out.trim().split('/').pop() ?? '';

/** kubectl create as `user` (impersonation); the API server's answer. */
function createAs(
  user: string,
  groups: string[],
  spec: Record<string, unknown>,
  kind = 'SandboxRun',
  annotations?: Record<string, string>,
): { ok: boolean; out: string } {
  const name = `r${++n}`;
  const body = JSON.stringify({ apiVersion: 'codemode.dev/v1alpha1', kind, metadata: { name, namespace: ns, ...(annotations && { annotations }) }, spec });
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
  // RBAC lets alice, bob and the "gateway" use SandboxRuns and their status here; the policy
  // decides on the owner, the status and the executor.
  await api.create({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { name: 'runs', namespace: ns },
    rules: [
      {
        apiGroups: ['codemode.dev'],
        resources: ['sandboxruns', 'sandboxsessions', 'sandboxruns/status', 'sandboxsessions/status'],
        verbs: ['create', 'get', 'list', 'patch', 'delete'],
      },
    ],
  } as KubernetesObject);
  await api.create({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'runs', namespace: ns },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'runs' },
    subjects: [
      { kind: 'User', apiGroup: 'rbac.authorization.k8s.io', name: 'alice' },
      { kind: 'User', apiGroup: 'rbac.authorization.k8s.io', name: 'bob' },
      { kind: 'User', apiGroup: 'rbac.authorization.k8s.io', name: 'gw:mallory' },
      { kind: 'User', apiGroup: 'rbac.authorization.k8s.io', name: 'carol' },
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
    // The gateway's users and groups carry these; cluster users may not take them.
    '--set',
    'config.usernamePrefix=gw:',
    '--set',
    'config.groupsPrefix=gwg:',
    // carol, in group ops, administers the namespace's runs and sessions.
    '--set',
    'ownerPolicy.adminGroups={ops}',
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

  it.each<[string, string, string[], Record<string, unknown>, RegExp]>([
    [
      "a cluster user whose name carries the gateway users' prefix",
      'gw:mallory',
      ['dev'],
      run({ user: 'gw:mallory' }),
      /user names starting with gw: belong to the gateway's users/,
    ],
    [
      "a group carrying the gateway groups' prefix, even one she is in",
      'alice',
      ['dev', 'gwg:team'],
      run({ user: 'alice', groups: ['gwg:team'] }),
      /may not list groups starting with gwg:/,
    ],
  ])('refuses %s', (_n, user, groups, spec, message) => {
    const r = createAs(user, groups, spec);
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

  it.each([
    // A run's whole spec is immutable (the CRD's rule answers first); a session's owner is the policy's.
    ['sbr', 'SandboxRun', run({ user: 'alice' }), /executes its spec once/],
    ['sbs', 'SandboxSession', { language: 'python', owner: { user: 'alice' } }, /spec\.owner cannot be changed/],
  ])('refuses to change an owner later (%s)', (resource, kind, spec, message) => {
    const created = createAs('alice', ['dev'], spec, kind);
    expect(created.ok, created.out).toBe(true);
    const patch = patchAs('alice', resource, nameOf(created), { spec: { owner: { user: 'mallory' } } });
    expect(patch.ok).toBe(false);
    expect(patch.out).toMatch(message);
  });

  // A status is the gateway's record: a forged one could make a finished run look unstarted (and
  // be run again) or name another user's pod for a session.
  it.each([
    ['sbr', 'SandboxRun', run({ user: 'alice' }), { status: { phase: 'Succeeded' } }],
    ['sbs', 'SandboxSession', { language: 'python', owner: { user: 'alice' } }, { status: { podName: 'sbs-someone-else' } }],
  ])('refuses a status written by anyone but the gateway (%s)', (resource, kind, spec, status) => {
    const created = createAs('alice', ['dev'], spec, kind);
    expect(created.ok, created.out).toBe(true);
    const forged = patchAs('alice', resource, nameOf(created), status, 'status');
    expect(forged.ok).toBe(false);
    expect(forged.out).toMatch(/written by the gateway alone/);
    const gateway = patchAs(GW(), resource, nameOf(created), status, 'status');
    expect(gateway.ok, gateway.out).toBe(true);
  });

  it('refuses the executor annotation from anyone but the gateway, at create and later', () => {
    const annotated = createAs('alice', ['dev'], run({ user: 'alice' }), 'SandboxRun', { 'codemode.dev/executor': 'some-replica' });
    expect(annotated.ok).toBe(false);
    expect(annotated.out).toMatch(
      /codemode\.dev\/executor, codemode\.dev\/claimed-at and codemode\.dev\/recovering-from annotations are set by the gateway alone/,
    );
    const plain = createAs('alice', ['dev'], run({ user: 'alice' }));
    expect(plain.ok, plain.out).toBe(true);
    const claimed = patchAs('alice', 'sbr', nameOf(plain), { metadata: { annotations: { 'codemode.dev/executor': 'some-replica' } } });
    expect(claimed.ok).toBe(false);
    expect(claimed.out).toMatch(/set by the gateway alone/);
    const timed = patchAs('alice', 'sbr', nameOf(plain), { metadata: { annotations: { 'codemode.dev/claimed-at': '2099-01-01T00:00:00Z' } } });
    expect(timed.ok).toBe(false);
    expect(timed.out).toMatch(/set by the gateway alone/);
    const recovering = patchAs('alice', 'sbr', nameOf(plain), { metadata: { annotations: { 'codemode.dev/recovering-from': 'some-replica' } } });
    expect(recovering.ok).toBe(false);
    expect(recovering.out).toMatch(/set by the gateway alone/);
    // Other annotations are hers to set; the gateway claims the run as it does.
    expect(patchAs('alice', 'sbr', nameOf(plain), { metadata: { annotations: { note: 'x' } } }).ok).toBe(true);
    expect(
      patchAs(GW(), 'sbr', nameOf(plain), {
        metadata: { annotations: { 'codemode.dev/executor': 'replica-1', 'codemode.dev/claimed-at': new Date().toISOString() } },
      }).ok,
    ).toBe(true);
  });

  it("refuses any change of a run's spec, the gateway's too (the CRD's rule)", () => {
    const created = createAs('alice', ['dev'], run({ user: 'alice' }));
    expect(created.ok, created.out).toBe(true);
    for (const user of ['alice', GW()]) {
      const edit = patchAs(user, 'sbr', nameOf(created), { spec: { code: 'print(2)' } });
      expect(edit.ok).toBe(false);
      expect(edit.out).toMatch(/executes its spec once/);
    }
  });

  it("lets only a session's owner change its spec", () => {
    const created = createAs('alice', ['dev'], { language: 'python', owner: { user: 'alice' } }, 'SandboxSession');
    expect(created.ok, created.out).toBe(true);
    const bob = patchAs('bob', 'sbs', nameOf(created), { spec: { idleTimeoutSeconds: 60 } });
    expect(bob.ok).toBe(false);
    expect(bob.out).toMatch(/can be changed or deleted by its owner only \(spec.owner.user alice\)/);
    const alice = patchAs('alice', 'sbs', nameOf(created), { spec: { idleTimeoutSeconds: 60 } });
    expect(alice.ok, alice.out).toBe(true);
  });

  // The session's pod was made from its profile, and installs follow the policy of the profile
  // spec.profile names: switching it would install under another profile's policy (the CRD's rule).
  it.each([
    ['changed', { profile: 'locked' }, { profile: 'open' }],
    ['removed', { profile: 'locked' }, { profile: null }],
    ['added', {}, { profile: 'open' }],
  ])("refuses a session's profile %s, its owner's edit too", (_n, before, patch) => {
    const created = createAs('alice', ['dev'], { language: 'python', owner: { user: 'alice' }, ...before }, 'SandboxSession');
    expect(created.ok, created.out).toBe(true);
    const edit = patchAs('alice', 'sbs', nameOf(created), { spec: patch });
    expect(edit.ok).toBe(false);
    expect(edit.out).toMatch(/spec\.profile cannot be changed/);
  });

  // RBAC cannot tell one user's objects from another's: whoever may delete SandboxSessions (to
  // clean up their own) could end everyone's.
  it.each([
    ['run', 'SandboxRun', 'sbr', run({ user: 'alice' })],
    ['session', 'SandboxSession', 'sbs', { language: 'python', owner: { user: 'alice' } }],
  ])('lets only its owner or an administrator delete or relabel a %s', (_n, kind, resource, spec) => {
    const made = (): string => {
      const created = createAs('alice', ['dev'], spec, kind);
      expect(created.ok, created.out).toBe(true);
      return nameOf(created);
    };
    const name = made();
    for (const args of [
      ['delete', resource, name, '--wait=false'],
      ['label', resource, name, 'x=y'],
      ['annotate', resource, name, 'x=y'],
    ]) {
      const bob = kubectlAs('bob', ['dev'], ...args);
      expect(bob.ok, args.join(' ')).toBe(false);
      expect(bob.out).toMatch(/can be changed or deleted by its owner only \(spec.owner.user alice\) or a member of ownerPolicy.adminGroups/);
    }
    expect(kubectlAs('alice', ['dev'], 'label', resource, name, 'x=y')).toMatchObject({ ok: true });
    expect(kubectlAs('alice', ['dev'], 'delete', resource, name, '--wait=false')).toMatchObject({ ok: true });
    const other = made();
    expect(kubectlAs('carol', ['ops'], 'label', resource, other, 'x=y')).toMatchObject({ ok: true });
    expect(kubectlAs('carol', ['ops'], 'delete', resource, other, '--wait=false')).toMatchObject({ ok: true });
  });

  // An audit record of session calls is what its owner ran: the gateway writes it as theirs (its
  // spec.owner), and its TTL, not its owner, ends it.
  it("refuses an audit record's owner its deletion and any change; an administrator and the gateway may", () => {
    const record = (): string => {
      const created = createAs(GW(), [], { ...run({ user: 'alice' }), session: 's' }, 'SandboxRun', { 'codemode.dev/executor': 'codemode.dev/audit-record' });
      expect(created.ok, created.out).toBe(true);
      return nameOf(created);
    };
    const name = record();
    for (const args of [
      ['delete', 'sbr', name, '--wait=false'],
      ['label', 'sbr', name, 'x=y'],
      ['annotate', 'sbr', name, 'x=y'],
    ]) {
      const alice = kubectlAs('alice', ['dev'], ...args);
      expect(alice.ok, args.join(' ')).toBe(false);
      expect(alice.out).toMatch(/an audit record of session calls is kept until its TTL ends/);
    }
    const finalizer = patchAs('alice', 'sbr', name, { metadata: { finalizers: ['example.com/keep'] } });
    expect(finalizer.ok).toBe(false);
    expect(kubectlAs('carol', ['ops'], 'label', 'sbr', name, 'x=y')).toMatchObject({ ok: true });
    expect(kubectlAs('carol', ['ops'], 'delete', 'sbr', name, '--wait=false')).toMatchObject({ ok: true });
    expect(kubectlAs(GW(), [], 'delete', 'sbr', record(), '--wait=false')).toMatchObject({ ok: true });
    // A run of hers that is not a record stays hers to delete.
    const own = createAs('alice', ['dev'], run({ user: 'alice' }));
    expect(kubectlAs('alice', ['dev'], 'delete', 'sbr', nameOf(own), '--wait=false')).toMatchObject({ ok: true });
  });

  it("lets the cluster's garbage collector delete what an owner's deleted object owned", async () => {
    const session = createAs('alice', ['dev'], { language: 'python', owner: { user: 'alice' } }, 'SandboxSession');
    expect(session.ok, session.out).toBe(true);
    const got = spawnSync(KUBECTL, ['get', 'sbs', nameOf(session), '-n', ns, '-o', 'jsonpath={.metadata.uid}'], { env: process.env, encoding: 'utf8' });
    const owned = createAs('alice', ['dev'], run({ user: 'alice' }));
    expect(owned.ok, owned.out).toBe(true);
    const ref = [{ apiVersion: 'codemode.dev/v1alpha1', kind: 'SandboxSession', name: nameOf(session), uid: got.stdout }];
    expect(patchAs('alice', 'sbr', nameOf(owned), { metadata: { ownerReferences: ref } })).toMatchObject({ ok: true });
    expect(kubectlAs('alice', ['dev'], 'delete', 'sbs', nameOf(session), '--wait=false')).toMatchObject({ ok: true });
    await until(() => /NotFound/.test(kubectlAs('alice', ['dev'], 'get', 'sbr', nameOf(owned)).out), 60_000, 'the owned run to be collected');
  });
});
