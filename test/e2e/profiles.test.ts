// SandboxProfiles on the real cluster: two profiles' warm pools side by side with the built-in
// one, each versioned and counted in its status; a run and a session of a profile land in its pool
// with its limits and its pre-imported modules; unknown and invalid profiles are refused with the
// list; deleting a profile removes its pool; a profile's node selector and tolerations place its
// pods.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { V1Pod } from '@kubernetes/client-node';
import { GROUP, SANDBOXPROFILE_PLURAL, SANDBOXRUN_PLURAL, VERSION, type SandboxProfile, type SandboxRun } from '../../src/api/v1alpha1/index.js';
import { isReserved } from '../../src/controller/pool-plan.js';
import { SANDBOX_IMAGE, createNamespace, deleteNamespace, readyPoolPods, testKube, until } from './helpers/kube.js';
import { connect, startOperator, type RunningOperator, type TestClient, type ToolResult } from './helpers/operator.js';

const k = testKube();
let ns = '';
let op: RunningOperator;
let mcp: TestClient;
const api = { group: GROUP, version: VERSION };

async function createProfile(name: string, spec: Record<string, unknown>): Promise<void> {
  await k.custom.createNamespacedCustomObject({
    ...api,
    namespace: ns,
    plural: SANDBOXPROFILE_PLURAL,
    body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'SandboxProfile', metadata: { name }, spec },
  });
}
const profile = async (name: string): Promise<SandboxProfile> =>
  (await k.custom.getNamespacedCustomObject({ ...api, namespace: ns, plural: SANDBOXPROFILE_PLURAL, name })) as SandboxProfile;
const warmPods = (p: string): Promise<V1Pod[]> => readyPoolPods(k, ns, `codemode.dev/profile=${p}`);
const reservedPods = async (p: string): Promise<V1Pod[]> =>
  (await k.core.listNamespacedPod({ namespace: ns, labelSelector: `codemode.dev/profile=${p}` })).items.filter(isReserved);
const EMOJI = '\u{1F600}';
const sc = (r: ToolResult): Record<string, unknown> => r.structuredContent ?? {};

beforeAll(async () => {
  ns = await createNamespace(k, 'profiles');
  // One pod per pool: three pools on a shared node.
  // A pod's startup time bounded to 45 s: the last test waits it out for a pod no node may run.
  op = await startOperator(ns, { CODEMODE_WARM_POOL_SIZE: '1', CODEMODE_POD_STARTUP_TIMEOUT_SECONDS: '45' });
  await createProfile('slim', {
    description: 'Small sandboxes with sqlite3 loaded.',
    image: SANDBOX_IMAGE,
    resources: { cpu: '500m', memory: '192Mi' },
    maxResources: { memory: '256Mi' },
    warmPool: { min: 1, max: 1 },
    preImport: ['sqlite3'],
    workspace: { medium: 'Memory', sizeLimit: '32Mi' },
  });
  // A description at its bound in astral characters (1,024 UTF-16 units): the API server counts
  // 512 characters, and so must the gateway that reads it back.
  await createProfile('other', { description: EMOJI.repeat(512), image: SANDBOX_IMAGE, warmPool: { min: 1, max: 1 } });
  await createProfile('broken', { image: SANDBOX_IMAGE, resources: { memory: '1Gi' }, maxResources: { memory: '512Mi' } });
  mcp = await connect(op.url, 'current');
});
afterAll(async () => {
  await mcp?.close();
  await op?.stop();
  await deleteNamespace(k, ns);
});

describe('SandboxProfiles', () => {
  it("keeps each profile's pool beside the built-in one and reports it in the profile's status", async () => {
    for (const p of ['slim', 'other', 'default']) await until(async () => (await warmPods(p)).length === 1, 180_000, `a ready warm pod of ${p}`);
    const slim = (await warmPods('slim'))[0];
    expect(slim?.metadata?.name).toMatch(/^codemode-pool-slim-/);
    expect(slim?.spec?.containers[0]?.resources?.limits?.memory).toBe('192Mi');
    expect(slim?.metadata?.ownerReferences?.[0]).toMatchObject({ kind: 'SandboxProfile', name: 'slim' });
    await until(async () => (await profile('slim')).status?.readyPods === 1, 60_000, 'slim status readyPods 1');
    expect((await profile('slim')).status).toMatchObject({ readyPods: 1, targetPods: 1, conditions: [{ type: 'Ready', status: 'True', reason: 'Accepted' }] });
    await until(async () => (await profile('other')).status?.readyPods === 1, 60_000, 'other status readyPods 1');
    expect((await profile('other')).status?.conditions?.[0]).toMatchObject({ type: 'Ready', status: 'True', reason: 'Accepted' });
    await expect(createProfile('long', { description: EMOJI.repeat(513), image: SANDBOX_IMAGE })).rejects.toThrow(
      /spec.description: Too long: may not be (longer|more) than 512/,
    );
  });

  it('says in its status why an invalid profile cannot be used, and refuses runs naming it', async () => {
    await until(async () => (await profile('broken')).status?.conditions?.[0]?.reason === 'InvalidSpec', 60_000, 'broken is InvalidSpec');
    expect((await profile('broken')).status?.conditions?.[0]?.message).toMatch(/default memory 1Gi is above its maximum 512Mi/);
    const r = await mcp.callTool('execute_code', { code: 'print(1)', profile: 'broken' });
    expect(r.isError).toBe(true);
    expect(r.content[0]?.text).toMatch(/Profile broken cannot be used/);
  });

  it('runs a transient run in its profile’s warm pod, with the modules pre-imported, its limits and its /workspace', async () => {
    // cgroup v2, or v1 on older nodes.
    const limit =
      'import os\ndef limit():\n    for p in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):\n        if os.path.exists(p):\n            return open(p).read().strip()\n';
    const r = await mcp.callTool('execute_code', {
      code:
        limit +
        'import socket, sys, subprocess\nws = subprocess.run(["df", "-k", "--output=fstype,size", "/workspace"], capture_output=True, text=True).stdout.split()[-2:]\n' +
        'print(socket.gethostname().split("-")[2], "sqlite3" in sys.modules, limit(), *ws)',
      profile: 'slim',
      timeout_seconds: 60,
    });
    expect(sc(r).phase, JSON.stringify(r.content)).toBe('Succeeded');
    expect(sc(r).stdout).toBe(`slim True ${192 * 1024 * 1024} tmpfs ${32 * 1024}\n`);
    // The built-in profile imports nothing ahead, and its /workspace is the gateway's, on disk.
    const plain = await mcp.callTool('execute_code', {
      code: 'import sys, subprocess\nprint("sqlite3" in sys.modules, subprocess.run(["stat", "-f", "-c", "%T", "/workspace"], capture_output=True, text=True).stdout.strip())',
      timeout_seconds: 60,
    });
    expect(sc(plain).stdout).not.toMatch(/tmpfs/);
    expect(sc(plain).stdout).toMatch(/^False \S+\n$/);
  });

  it('starts a session of a profile from its pool, with the modules loaded', async () => {
    // After the slim warm run above, this operator reserves the next ready slim pod for its next
    // warm run (and the pool starts another): with only the pool's pod counted, a session created
    // in between would find the one ready pod just reserved and start cold.
    await until(
      async () => (await warmPods('slim')).length === 1 && (await reservedPods('slim')).length === 1,
      180_000,
      'the slim pool refilled beside the reservation',
    );
    const created = await mcp.callTool('create_session', { language: 'python', profile: 'slim' });
    expect(created.isError ?? false, JSON.stringify(created.content)).toBe(false);
    const session = String(sc(created).session);
    const r = await mcp.callTool('execute_code', { session, code: 'import socket, sys\n(socket.gethostname().split("-")[2], "sqlite3" in sys.modules)' });
    // Said on a failure: the slim pods as the API server has them then (which the claim missed, and why).
    const slimPods = async (): Promise<string> =>
      JSON.stringify(
        (await k.core.listNamespacedPod({ namespace: ns, labelSelector: 'codemode.dev/profile=slim' })).items.map((p) => ({
          name: p.metadata?.name,
          created: p.metadata?.creationTimestamp,
          labels: p.metadata?.labels,
          reserved: isReserved(p),
          ready: p.status?.conditions?.find((c) => c.type === 'Ready'),
        })),
      );
    expect(sc(r).result, `slim pods: ${await slimPods()}`).toBe("('slim', True)");
    const withProfile = await mcp.callTool('execute_code', { session, code: '1', profile: 'other' });
    expect(withProfile.isError).toBe(true);
    expect(withProfile.content[0]?.text).toMatch(/profile cannot be combined with session/);
  });

  it('refuses an unknown profile with the list, before anything is created', async () => {
    const before = (await k.custom.listNamespacedCustomObject({ ...api, namespace: ns, plural: SANDBOXRUN_PLURAL })) as { items: unknown[] };
    const r = await mcp.callTool('execute_code', { code: 'print(1)', profile: 'nope' });
    expect(r.isError).toBe(true);
    expect(r.content[0]?.text).toMatch(/Unknown profile nope\..*Use one of: default, other, slim/s);
    const s = await mcp.callTool('create_session', { profile: 'nope' });
    expect(s.isError).toBe(true);
    expect(s.content[0]?.text).toMatch(/Unknown profile nope/);
    const after = (await k.custom.listNamespacedCustomObject({ ...api, namespace: ns, plural: SANDBOXRUN_PLURAL })) as { items: unknown[] };
    expect(after.items.length).toBe(before.items.length);
  });

  // execute_code has no resources.memory: after an OOM kill it names the profiles with more memory.
  it('names the profiles with more memory when a run of a smaller one is OOM-killed', async () => {
    const r = await mcp.callTool('execute_code', { code: 'x = b"x" * (400 << 20)', profile: 'slim', timeout_seconds: 60 });
    expect(sc(r).reason, r.content[0]?.text).toBe('OOMKilled');
    const message = String(sc(r).message);
    expect(message).toMatch(/^The program used more memory than its limit \(192Mi\) and was killed; files in \/tmp and \/workspace count as memory\./);
    expect(message).toMatch(/ Or run it with a profile that has more: default \(\d+[MG]i\), other \(\d+[MG]i\)\.$/);
    expect(message).not.toContain('resources.memory');
    expect(r.content[0]?.text).toContain(message);
  });

  it('fails a SandboxRun applied with an unknown profile, saying which exist', async () => {
    const run = (await k.custom.createNamespacedCustomObject({
      ...api,
      namespace: ns,
      plural: SANDBOXRUN_PLURAL,
      body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'SandboxRun', metadata: { generateName: 'kubectl-' }, spec: { code: 'print(1)', profile: 'nope' } },
    })) as SandboxRun;
    const get = async (): Promise<SandboxRun> =>
      (await k.custom.getNamespacedCustomObject({ ...api, namespace: ns, plural: SANDBOXRUN_PLURAL, name: run.metadata.name })) as SandboxRun;
    await until(async () => (await get()).status?.phase === 'Failed', 60_000, 'the run Failed');
    expect((await get()).status).toMatchObject({ reason: 'InvalidSpec' });
    expect((await get()).status?.message).toMatch(/Unknown profile nope.*Use one of: default, other, slim/);
  });

  it("removes a deleted profile's pool", async () => {
    await until(async () => (await warmPods('other')).length === 1, 180_000, 'other still has its pod');
    await k.custom.deleteNamespacedCustomObject({ ...api, namespace: ns, plural: SANDBOXPROFILE_PLURAL, name: 'other' });
    await until(
      async () => (await k.core.listNamespacedPod({ namespace: ns, labelSelector: 'codemode.dev/pool=warm,codemode.dev/profile=other' })).items.length === 0,
      120_000,
      "other's pool pods gone",
    );
    const r = await mcp.callTool('execute_code', { code: 'print(1)', profile: 'other' });
    expect(r.content[0]?.text).toMatch(/Unknown profile other/);
  });

  it('places its pods by its node selector and tolerations, and a selector no node has fails the run as Unschedulable', async () => {
    const node = (await k.core.listNode()).items[0]?.metadata?.labels?.['kubernetes.io/hostname'] ?? '';
    expect(node).not.toBe('');
    const tolerations = [{ key: 'codemode.dev/test-sandbox-only', operator: 'Exists', effect: 'NoSchedule' }];
    await createProfile('placed', { image: SANDBOX_IMAGE, nodeSelector: { 'kubernetes.io/hostname': node }, tolerations });
    await createProfile('nowhere', { image: SANDBOX_IMAGE, nodeSelector: { 'codemode.dev/test-pool': 'absent' } });
    await until(
      async () => (await profile('nowhere')).status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false,
      60_000,
      'profiles accepted',
    );

    const created = await mcp.callTool('create_session', { language: 'python', profile: 'placed' });
    expect(created.isError ?? false, JSON.stringify(created.content)).toBe(false);
    const session = String(sc(created).session);
    const pods = (await k.core.listNamespacedPod({ namespace: ns, labelSelector: 'codemode.dev/profile=placed' })).items;
    expect(pods.length).toBeGreaterThan(0);
    for (const p of pods) {
      expect(p.spec?.nodeSelector).toEqual({ 'kubernetes.io/hostname': node });
      expect(p.spec?.tolerations).toEqual(expect.arrayContaining(tolerations));
    }
    expect(sc(await mcp.callTool('execute_code', { session, code: '6 * 7' })).result).toBe('42');
    await mcp.callTool('close_session', { session });

    // No node has the label: the scheduler keeps the pod, and the run says why when its pod's
    // startup time (CODEMODE_POD_STARTUP_TIMEOUT_SECONDS of this file's operator) is over.
    const r = await mcp.callTool('execute_code', { code: 'print(1)', profile: 'nowhere', timeout_seconds: 10 });
    expect(sc(r)).toMatchObject({ phase: 'Failed', reason: 'Unschedulable' });
  });

  it('checks a sandbox of the default profile in the self-check: its limits, on its nodes', async () => {
    const node = (await k.core.listNode()).items[0]?.metadata?.labels?.['kubernetes.io/hostname'] ?? '';
    await createProfile('default', { image: SANDBOX_IMAGE, resources: { memory: '200Mi' }, nodeSelector: { 'kubernetes.io/hostname': node } });
    const checking = await startOperator(ns, {}, { sandboxCheck: true });
    try {
      const check = checking.operator.sandboxCheck;
      await until(() => check?.status.kind === 'checked', 480_000, 'a completed sandbox check');
      const state = check?.status;
      const results = state?.kind === 'checked' ? state.results : [];
      expect(
        results.every((x) => x.enforced),
        JSON.stringify(results),
      ).toBe(true);
      // The canary had the default profile's memory limit (200Mi), not the gateway's default.
      expect(results.find((x) => x.check === 'memory_limit')?.detail).toContain(`at most ${200 * 1024 * 1024})`);
    } finally {
      await checking.stop();
      await k.custom.deleteNamespacedCustomObject({ ...api, namespace: ns, plural: SANDBOXPROFILE_PLURAL, name: 'default' });
    }
  }, 540_000);
});
