// The warm pool, versioned and sized by demand, end to end on the real cluster: a pod of another
// version is never served and is replaced; two runtime versions side by side each mount their
// own ConfigMap; a pool of size 0 drains; a pool grown by a burst keeps back-to-back callers warm;
// a claim that finds no ready pod waits for the pool pod that is starting.
import { V1MicroTime, CoordinationV1Api, Watch, type V1Pod } from '@kubernetes/client-node';
import { setHeaderOptions } from '@kubernetes/client-node/dist/middleware.js';
import { PatchStrategy } from '@kubernetes/client-node/dist/patch.js';
import { describe, expect, it } from 'vitest';
import {
  ANNOTATION_RESERVED_BY,
  GROUP,
  LABEL_PROFILE,
  SANDBOXPROFILE_PLURAL,
  SANDBOXRUN_PLURAL,
  SANDBOXSESSION_PLURAL,
  VERSION,
  type SandboxRun,
} from '../../src/api/v1alpha1/index.js';
import { LEADER_LEASE } from '../../src/controller/pool-controller.js';
import { RUNNING_WRITE_DELAY_MS } from '../../src/runs/record.js';
import { runtimeConfigMapName } from '../../src/sandbox/runtime-configmap.js';
import { findRuntimeDir, readRuntimeFiles } from '../../src/sessions/runtime-files.js';
import { SANDBOX_IMAGE, createNamespace, deleteNamespace, readyPoolPods, testKube, until } from './helpers/kube.js';
import { connect, startOperator, type RunningOperator, type TestClient, type ToolResult } from './helpers/operator.js';

const k = testKube();
const leases = k.kc.makeApiClient(CoordinationV1Api);
const HOSTNAME = 'import socket\nprint(socket.gethostname())';
const POOL = 'codemode.dev/pool';
const HASH = 'codemode.dev/pool-hash';
/** The label releases up to 0922e5e reserved a pool pod with; no longer written or read. */
const LEGACY_RESERVED_LABEL = 'codemode.dev/reserved-by';

const sc = (r: ToolResult): Record<string, unknown> => r.structuredContent ?? {};
/** The SandboxRun a call's result names. */
const readRun = async (ns: string, r: ToolResult): Promise<SandboxRun> =>
  (await k.custom.getNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace: ns,
    plural: SANDBOXRUN_PLURAL,
    name: String(sc(r).run),
  })) as SandboxRun;
const host = (r: ToolResult): string => String(sc(r).stdout ?? '').trim();
const isReady = (p: V1Pod): boolean => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;

/** Unclaimed pool pods that are ready and not being deleted, of one version when `hash` is given. */
/** Ready pool pods nobody claimed or reserved (a reservation is an annotation on a `warm` pod). */
const readyWarm = (ns: string, hash?: string): Promise<V1Pod[]> => readyPoolPods(k, ns, hash === undefined ? undefined : `${HASH}=${hash}`);

async function gone(ns: string, name: string): Promise<boolean> {
  return k.core.readNamespacedPod({ namespace: ns, name }).then(
    (p) => p.metadata?.deletionTimestamp !== undefined,
    () => true,
  );
}

/** Takes the pool leader's Lease (the operators of `ns` stopped): no pool pod is deleted or started. */
async function holdLeadership(ns: string): Promise<void> {
  const lease = await leases.readNamespacedLease({ namespace: ns, name: LEADER_LEASE });
  await leases.replaceNamespacedLease({
    namespace: ns,
    name: LEADER_LEASE,
    body: { ...lease, spec: { ...lease.spec, holderIdentity: 'e2e-holder', leaseDurationSeconds: 3600, renewTime: new V1MicroTime(Date.now()) } },
  });
}

async function call(mcp: TestClient, code = HOSTNAME): Promise<ToolResult> {
  const r = await mcp.callTool('execute_code', { code, timeout_seconds: 60 });
  expect(sc(r), JSON.stringify(r.content)).toMatchObject({ phase: 'Succeeded' });
  return r;
}

async function sessionPod(ns: string, session: string): Promise<V1Pod> {
  const s = (await k.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: SANDBOXSESSION_PLURAL, name: session })) as {
    status: { podName: string };
  };
  return k.core.readNamespacedPod({ namespace: ns, name: s.status.podName });
}

async function newSession(mcp: TestClient): Promise<string> {
  const r = await mcp.callTool('create_session', { language: 'python' });
  expect(sc(r), JSON.stringify(r.content)).toMatchObject({ phase: 'Ready' });
  return String(sc(r).session);
}

describe('warm pool versions', () => {
  it('never serves a pool pod of an older version, and replaces it', async () => {
    const ns = await createNamespace(k, 'pool-hash');
    try {
      const old = await startOperator(ns, { CODEMODE_WARM_POOL_MIN: '1', CODEMODE_WARM_POOL_MAX: '1' });
      let stale: V1Pod | undefined;
      await until(async () => (stale = (await readyWarm(ns))[0]) !== undefined, 120_000, 'a ready pool pod of the old version');
      const staleName = stale?.metadata?.name ?? '';
      await old.stop();
      // Hold the leader Lease by hand, so the new version cannot replace the old pod yet: the
      // window in which a pool chosen by label alone would serve it.
      await holdLeadership(ns);
      const op = await startOperator(ns, { CODEMODE_WARM_POOL_MIN: '1', CODEMODE_WARM_POOL_MAX: '1', CODEMODE_DEFAULT_MEMORY: '256Mi' });
      const mcp = await connect(op.url, 'current');
      try {
        expect(op.operator.poolController.hash).not.toBe(stale?.metadata?.labels?.[HASH]);
        for (let i = 0; i < 2; i++) expect(host(await call(mcp))).not.toBe(staleName);
        expect(op.operator.poolController.isLeader).toBe(false);
        const still = await k.core.readNamespacedPod({ namespace: ns, name: staleName });
        expect(still.metadata?.labels?.[POOL]).toBe('warm');
        // Let the new version lead: the old pod is deleted and one of the new version replaces it.
        await leases.deleteNamespacedLease({ namespace: ns, name: LEADER_LEASE });
        await until(() => gone(ns, staleName), 60_000, 'the old pool pod to be deleted');
        let fresh: V1Pod | undefined;
        await until(
          async () => (fresh = (await readyWarm(ns, op.operator.poolController.hash))[0]) !== undefined,
          120_000,
          'a ready pool pod of the new version',
        );
        expect(fresh?.spec?.containers[0]?.resources?.limits?.memory).toBe('256Mi');
        expect(host(await call(mcp))).toBe(fresh?.metadata?.name);
      } finally {
        await mcp.close();
        await op.stop();
      }
    } finally {
      await deleteNamespace(k, ns);
    }
  });

  it("retires a profile's pool when the profile changes: a claim through the old pool never takes a pod of the old version", async () => {
    const ns = await createNamespace(k, 'pool-retire');
    const profiles = { group: GROUP, version: VERSION, namespace: ns, plural: SANDBOXPROFILE_PLURAL };
    try {
      await k.custom.createNamespacedCustomObject({
        ...profiles,
        body: {
          apiVersion: `${GROUP}/${VERSION}`,
          kind: 'SandboxProfile',
          metadata: { name: 'slim' },
          spec: { image: SANDBOX_IMAGE, warmPool: { min: 1, max: 1 } },
        },
      });
      const first = await startOperator(ns, { CODEMODE_WARM_POOL_SIZE: '0' });
      let old: V1Pod | undefined;
      await until(
        async () => (old = (await readyWarm(ns)).find((p) => p.metadata?.labels?.[LABEL_PROFILE] === 'slim')) !== undefined,
        120_000,
        "a ready pod of the profile's pool",
      );
      const oldName = old?.metadata?.name ?? '';
      await first.stop();
      // No leader from here on: nothing deletes the old version's pod or starts one of the new.
      await holdLeadership(ns);
      const op = await startOperator(ns, { CODEMODE_WARM_POOL_SIZE: '0' });
      try {
        await until(() => op.operator.pools.pool('slim')?.hash === old?.metadata?.labels?.[HASH], 30_000, 'the profile seen by the operator');
        const retired = op.operator.pools.pool('slim');
        if (!retired) throw new Error('no pool for the profile');
        await k.custom.patchNamespacedCustomObject({ ...profiles, name: 'slim', body: [{ op: 'add', path: '/spec/resources', value: { memory: '200Mi' } }] });
        await until(() => op.operator.pools.pool('slim') !== retired, 30_000, 'the changed profile seen by the operator');
        expect(op.operator.pools.pool('slim')?.hash).not.toBe(retired.hash);
        // The old version's pod is still ready and unclaimed; the new version has none.
        expect((await readyWarm(ns)).map((p) => p.metadata?.name)).toEqual([oldName]);
        const owner = await k.core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'claim-owner' } } });
        const ref = { apiVersion: 'v1', kind: 'ConfigMap', name: 'claim-owner', uid: owner.metadata?.uid ?? '' };
        // A claim in flight through the replaced pool (or made through a reference to it) goes on in
        // the new one, which has nothing to give yet.
        expect(await retired.claim(ref, {}, 60)).toBeUndefined();
        const still = await k.core.readNamespacedPod({ namespace: ns, name: oldName });
        expect(still.metadata?.labels?.[POOL]).toBe('warm');
      } finally {
        await op.stop();
      }
    } finally {
      await deleteNamespace(k, ns);
    }
  });

  it('gives two runtime versions side by side each their own ConfigMap', async () => {
    const ns = await createNamespace(k, 'pool-runtime');
    const dir = findRuntimeDir();
    if (!dir) throw new Error('runtime/ not found');
    const files = readRuntimeFiles(dir);
    const variant = { ...files, 'python/kernel.py': `${files['python/kernel.py'] ?? ''}\n# variant b\n` };
    const [nameA, nameB] = [runtimeConfigMapName(files), runtimeConfigMapName(variant)];
    expect(nameA).not.toBe(nameB);
    const probe = "print(open('/codemode/runtime/python/kernel.py').read().endswith('# variant b\\n'))";
    const ops: RunningOperator[] = [];
    const clients: TestClient[] = [];
    const start = async (overrides = {}): Promise<TestClient> => {
      const op = await startOperator(ns, {}, overrides);
      ops.push(op);
      const c = await connect(op.url, 'current');
      clients.push(c);
      return c;
    };
    try {
      // Version A starts a session; then version B (A stopped, so B's controller makes the pod).
      const a = await start();
      const sa = await newSession(a);
      await clients.pop()?.close();
      await ops.pop()?.stop();
      const b = await start({ runtimeFiles: variant });
      const sb = await newSession(b);
      // A again, side by side with B: each session's pod keeps its own kernels.
      const a2 = await start();
      expect(String(sc(await a2.callTool('execute_code', { code: probe, session: sa })).stdout)).toBe('False\n');
      expect(String(sc(await b.callTool('execute_code', { code: probe, session: sb })).stdout)).toBe('True\n');
      for (const [session, name, content] of [
        [sa, nameA, files],
        [sb, nameB, variant],
      ] as const) {
        const pod = await sessionPod(ns, session);
        expect(pod.spec?.volumes?.find((v) => v.name === 'runtime')?.configMap?.name).toBe(name);
        const cm = await k.core.readNamespacedConfigMap({ namespace: ns, name });
        expect(cm.immutable).toBe(true);
        expect(cm.data?.['python__kernel.py']).toBe(content['python/kernel.py']);
      }
    } finally {
      await Promise.all(clients.map((c) => c.close()));
      await Promise.all(ops.map((o) => o.stop()));
      await deleteNamespace(k, ns);
    }
  });
});

describe('warm pool size', () => {
  it('drains the pool when its size is 0, leaving claimed pods and their sessions alone', async () => {
    const ns = await createNamespace(k, 'pool-drain');
    try {
      const first = await startOperator(ns, { CODEMODE_WARM_POOL_MIN: '2', CODEMODE_WARM_POOL_MAX: '2' });
      await until(async () => (await readyWarm(ns)).length === 2, 120_000, 'the pool to fill');
      // Nothing outlives the operator's intent: an abandoned pool pod still has a deadline.
      for (const p of await readyWarm(ns)) expect(p.spec?.activeDeadlineSeconds).toBeGreaterThan(3600);
      const m1 = await connect(first.url, 'current');
      const session = await newSession(m1);
      expect((await sessionPod(ns, session)).metadata?.name).toMatch(/^codemode-pool-/);
      await m1.close();
      await first.stop();
      const op = await startOperator(ns, { CODEMODE_WARM_POOL_SIZE: '0' });
      const mcp = await connect(op.url, 'current');
      try {
        await until(
          async () => (await k.core.listNamespacedPod({ namespace: ns, labelSelector: `${POOL}=warm` })).items.length === 0,
          60_000,
          'the pool to be drained',
        );
        const r = await mcp.callTool('execute_code', { code: '6 * 7', session });
        expect(sc(r), JSON.stringify(r.content)).toMatchObject({ result: '42' });
      } finally {
        await mcp.close();
        await op.stop();
      }
    } finally {
      await deleteNamespace(k, ns);
    }
  });

  it('grows under a burst of calls, then keeps as many back-to-back calls warm', async () => {
    const ns = await createNamespace(k, 'pool-demand');
    // Small requests: a dozen pool pods must not take a shared 2-core node's CPU from other tests. The
    // longest refill deferral is part of the time a replacement takes (lead ≈ 12 s), so a burst
    // of calls asks for far more than the minimum however slowly a loaded node serves them.
    const op = await startOperator(ns, {
      CODEMODE_WARM_POOL_MIN: '1',
      CODEMODE_WARM_POOL_MAX: '12',
      CODEMODE_WARM_POOL_REFILL_DEFER_MS: '10000',
      CODEMODE_CPU_REQUEST: '10m',
      CODEMODE_MEMORY_REQUEST: '32Mi',
    });
    const clients = await Promise.all(Array.from({ length: 4 }, () => connect(op.url, 'current')));
    try {
      const hash = op.operator.poolController.hash;
      await until(async () => (await readyWarm(ns, hash)).length >= 1, 120_000, 'the minimum pool');
      // A bursty caller: most of these go cold, and every one of them is demand.
      // 12 at once: 20 cold pods starting together on the 2-core test node left one run's runner
      // short of CPU for a minute (TimedOut) in a fresh-clone run.
      await Promise.all(Array.from({ length: 12 }, (_, i) => call(clients[i % 4] as TestClient)));
      // How far it grows depends on the measured claim rate and start-up time (a faster node asks
      // for fewer pods): it must grow well past the minimum, and then serve that many calls warm.
      const target = op.operator.poolController.target();
      expect(target).toBeGreaterThanOrEqual(6);
      const mcp = clients[0] as TestClient;
      // The steady state of a caller: a replica's first warm run also reserves the pod of its next
      // one (CODEMODE_WARM_POOL_RESERVE), so that first run takes two pool pods; the pool refills
      // behind both. One warm call first, then as many calls as the pool's target.
      await until(async () => (await readyWarm(ns, hash)).length >= 1, 150_000, 'a ready pool pod');
      expect(host(await call(mcp))).toMatch(/^codemode-pool-/);
      await until(async () => (await readyWarm(ns, hash)).length >= target, 150_000, `the pool to grow to ${target} ready pods`);
      const hosts: string[] = [];
      for (let i = 0; i < target; i++) hosts.push(host(await call(mcp)));
      expect(hosts.filter((h) => !h.startsWith('codemode-pool-'))).toEqual([]);
      expect(new Set(hosts).size).toBe(target);
    } finally {
      await Promise.all(clients.map((c) => c.close()));
      await op.stop();
      await deleteNamespace(k, ns);
    }
  });
});

describe('a claim that finds the pool empty', () => {
  it('waits for the pool pod that is starting instead of starting a cold pod of its own', async () => {
    const ns = await createNamespace(k, 'pool-starting');
    const op = await startOperator(ns, { CODEMODE_WARM_POOL_MIN: '1', CODEMODE_WARM_POOL_MAX: '1' });
    const mcp = await connect(op.url, 'current');
    try {
      const hash = op.operator.poolController.hash;
      await until(async () => (await readyWarm(ns, hash)).length === 1, 120_000, 'the pool pod');
      const first = host(await call(mcp));
      expect(first).toMatch(/^codemode-pool-/);
      // The leader replaces the claimed pod; catch its replacement while it is still starting.
      let starting = '';
      await until(
        async () => {
          const pods = (await k.core.listNamespacedPod({ namespace: ns, labelSelector: `${POOL}=warm` })).items;
          const p = pods.find((q) => q.metadata?.labels?.[HASH] === hash && !q.metadata?.deletionTimestamp && q.metadata?.name !== first);
          if (p && isReady(p))
            throw new Error(`the replacement ${p.metadata?.name} was ready before it was seen starting; the test cannot tell a wait from a claim`);
          starting = p?.metadata?.name ?? '';
          return starting !== '';
        },
        60_000,
        'the replacement pool pod',
      );
      // Nothing is ready now: the call is served by the pod that was starting, not a cold one.
      expect(await readyWarm(ns, hash)).toEqual([]);
      expect(host(await call(mcp))).toBe(starting);
      const cold = (await k.core.listNamespacedPod({ namespace: ns })).items.filter((p) => !p.metadata?.labels?.[HASH]);
      expect(cold.map((p) => p.metadata?.name)).toEqual([]);
    } finally {
      await mcp.close();
      await op.stop();
      await deleteNamespace(k, ns);
    }
  });
});

describe('a run created by a call', () => {
  it('is executed by that call alone: the controller, seeing its watch event first, reads none back', async () => {
    const ns = await createNamespace(k, 'pool-created');
    const op = await startOperator(ns, { CODEMODE_WARM_POOL_SIZE: '2' });
    const mcp = await connect(op.url, 'current');
    // Every read of a whole SandboxRun by the operator (the controller's read before it executes one).
    const custom = op.clients.custom;
    const read = custom.getNamespacedCustomObject.bind(custom);
    let runReads = 0;
    custom.getNamespacedCustomObject = ((param: Parameters<typeof read>[0], options?: Parameters<typeof read>[1]) => {
      if (param.plural === SANDBOXRUN_PLURAL) runReads++;
      return read(param, options);
    }) as typeof read;
    try {
      await until(async () => (await readyWarm(ns, op.operator.poolController.hash)).length === 2, 120_000, 'the pool');
      for (let i = 0; i < 10; i++) await call(mcp);
      expect(runReads).toBe(0);
    } finally {
      await mcp.close();
      await op.stop();
      await deleteNamespace(k, ns);
    }
  });
});

describe('reserved pool pods', () => {
  const reserved = async (ns: string): Promise<V1Pod[]> =>
    (await k.core.listNamespacedPod({ namespace: ns, labelSelector: `${POOL}=warm` })).items.filter(
      (p) => !p.metadata?.deletionTimestamp && p.metadata?.annotations?.[ANNOTATION_RESERVED_BY] !== undefined,
    );

  it("runs the next warm call in a pod reserved ahead of time, records it as the run's, and gives the reservation up at stop", async () => {
    const ns = await createNamespace(k, 'pool-reserve');
    try {
      await reserveAndUse(ns);
      // Stopping gave the reservation up: nobody else would use the pod.
      await until(async () => (await reserved(ns)).length === 0, 30_000, 'no reserved pod after stop');
    } finally {
      await deleteNamespace(k, ns);
    }
  });

  // Another replica's reservation, as written now (an annotation on a pod still labelled warm: a
  // label change costs the node a NetworkPolicy resync) or by a replica of a release up to 0922e5e
  // (relabelled `pool=reserved`: this release does not read it as a reservation, but a pod not
  // labelled warm is never taken): taking such a pod would run code in a pod another replica is
  // running code in.
  it.each([
    ['as written now (an annotation)', { annotations: { [ANNOTATION_RESERVED_BY]: '0123456789abcdef' } }, 'warm'],
    ['as releases up to 0922e5e wrote it (a label)', { labels: { [POOL]: 'reserved', [LEGACY_RESERVED_LABEL]: '0123456789abcdef' } }, 'reserved'],
  ])(
    'never claims, counts or removes a pool pod another replica reserved, %s',
    async (_form, reservation, poolLabel) => {
      const ns = await createNamespace(k, 'pool-reserved-other');
      const op = await startOperator(ns, { CODEMODE_WARM_POOL_MIN: '2', CODEMODE_WARM_POOL_MAX: '2', CODEMODE_WARM_POOL_RESERVE: '0' });
      const mcp = await connect(op.url, 'current');
      try {
        await until(async () => (await readyWarm(ns)).length === 2, 120_000, 'the pool to fill');
        const [taken] = await readyWarm(ns);
        const name = taken?.metadata?.name ?? '';
        await k.core.patchNamespacedPod({ namespace: ns, name, body: { metadata: reservation } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
        // Not counted as one of the pool's: the leader starts another beside it.
        await until(async () => (await readyWarm(ns)).length === 2, 120_000, 'two unreserved ready pool pods beside the reserved one');
        for (let i = 0; i < 3; i++) expect(host(await call(mcp))).not.toBe(name);
        await until(async () => (await readyWarm(ns)).length === 2, 120_000, 'the pool refilled');
        // Still there, untouched: neither claimed nor deleted as surplus.
        const after = await k.core.readNamespacedPod({ namespace: ns, name });
        expect(after.metadata?.deletionTimestamp).toBeUndefined();
        expect(after.metadata?.labels?.[POOL]).toBe(poolLabel);
        expect(after.metadata?.ownerReferences ?? []).toEqual([]);
      } finally {
        await mcp.close();
        await op.stop();
        await deleteNamespace(k, ns);
      }
    },
    420_000,
  );

  // The code starts in the reserved pod while the run's create is in flight; nothing of it may
  // leave the sandbox before the run exists. A create the API server refuses (here a
  // ResourceQuota of zero SandboxRuns) must leave no output with the caller and no pod behind.
  it('starts the code before its run is created, lets nothing of it out when the create is refused, and then waits for the create', async () => {
    const ns = await createNamespace(k, 'pool-early');
    const op = await startOperator(ns, { CODEMODE_WARM_POOL_MIN: '2', CODEMODE_WARM_POOL_MAX: '2', CODEMODE_WARM_POOL_RESERVE: '1' });
    const mcp = await connect(op.url, 'current');
    try {
      await until(async () => (await readyWarm(ns)).length === 2, 120_000, 'the pool to fill');
      await call(mcp);
      let pod: V1Pod | undefined;
      await until(async () => (pod = (await reserved(ns))[0]) !== undefined, 60_000, 'a reserved pool pod');
      // Ready pods beside the reservation: one is reserved again right after the refused call.
      await until(async () => (await readyWarm(ns)).length === 2, 120_000, 'the pool refilled');
      const before = await k.custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: SANDBOXRUN_PLURAL });
      await k.core.createNamespacedResourceQuota({
        namespace: ns,
        body: { metadata: { name: 'no-runs' }, spec: { hard: { [`count/${SANDBOXRUN_PLURAL}.${GROUP}`]: '0' } } },
      });
      await until(
        async () => (await k.core.readNamespacedResourceQuota({ namespace: ns, name: 'no-runs' })).status?.hard !== undefined,
        60_000,
        'the quota in force',
      );
      const r = await mcp.callTool('execute_code', { code: 'print("LEAKED-" + "MARKER", flush=True)\nimport time\ntime.sleep(30)', timeout_seconds: 60 });
      expect(r.isError).toBe(true);
      expect(JSON.stringify(r)).not.toContain('LEAKED-MARKER');
      expect(JSON.stringify(r.content)).toMatch(/quota/i);
      // The reserved pod ran the code, so it goes (single use); the fallback path would have left it.
      await until(async () => gone(ns, pod?.metadata?.name ?? ''), 30_000, 'the reserved pod that ran the code deleted');
      const after = await k.custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: SANDBOXRUN_PLURAL });
      expect((after as { items: unknown[] }).items).toHaveLength((before as { items: unknown[] }).items.length);
      // After a refusal, runs are created before their code starts: a caller retrying against the
      // full quota uses up no more pool pods.
      let next: V1Pod | undefined;
      await until(async () => (next = (await reserved(ns))[0]) !== undefined, 60_000, 'the next reservation');
      for (let i = 0; i < 2; i++) {
        const again = await mcp.callTool('execute_code', { code: 'print("LEAKED-" + "MARKER")' });
        expect(again.isError).toBe(true);
        expect(JSON.stringify(again.content)).toMatch(/quota/i);
      }
      expect((await reserved(ns)).map((p) => p.metadata?.name)).toEqual([next?.metadata?.name]);
      // Once runs may be created again, the next call runs warm as before.
      await k.core.deleteNamespacedResourceQuota({ namespace: ns, name: 'no-runs' });
      await until(async () => host(await mcp.callTool('execute_code', { code: HOSTNAME })).startsWith('codemode-pool-'), 60_000, 'a warm call after the quota');
    } finally {
      await mcp.close();
      await op.stop();
      await deleteNamespace(k, ns);
    }
  }, 300_000);

  async function reserveAndUse(ns: string): Promise<void> {
    const op = await startOperator(ns, { CODEMODE_WARM_POOL_MIN: '2', CODEMODE_WARM_POOL_MAX: '2', CODEMODE_WARM_POOL_RESERVE: '1' });
    const mcp = await connect(op.url, 'current');
    try {
      await until(async () => (await readyWarm(ns)).length === 2, 120_000, 'the pool to fill');
      expect(host(await call(mcp))).toMatch(/^codemode-pool-/);
      // Once the first warm run is recorded, this process reserves a ready pod for its next one.
      let pod: V1Pod | undefined;
      await until(async () => (pod = (await reserved(ns))[0]) !== undefined, 60_000, 'a reserved pool pod');
      // Reserved by annotation: the pod's labels (what NetworkPolicy controllers watch) stay as made.
      const mark = pod?.metadata?.annotations?.[ANNOTATION_RESERVED_BY];
      expect(mark).toMatch(/^[0-9a-f]{16}$/);
      expect(pod?.metadata?.labels?.[LEGACY_RESERVED_LABEL]).toBeUndefined();
      expect(pod?.metadata?.ownerReferences?.some((o) => o.kind === 'SandboxRun')).toBeFalsy();
      // A short run in it: the pod goes once the outcome is stored, never relabelled on the way
      // (every label change costs the node a NetworkPolicy resync). Every version of the pod the
      // API server shows from now until its deletion is watched. The pool is still refilling: the
      // next reservation follows once one of its pods is ready, not only at the next run's end.
      const seen: V1Pod[] = [];
      let deleted = false;
      const watching = await new Watch(k.kc).watch(
        `/api/v1/namespaces/${ns}/pods`,
        { fieldSelector: `metadata.name=${pod?.metadata?.name}`, resourceVersion: pod?.metadata?.resourceVersion },
        (type: string, obj: V1Pod) => {
          seen.push(obj);
          if (type === 'DELETED') deleted = true;
        },
        () => undefined,
      );
      let short: ToolResult;
      try {
        short = await call(mcp);
        expect(host(short)).toBe(pod?.metadata?.name);
        await until(() => deleted, 60_000, 'the pod of the short run deleted (seen by the watch)');
      } finally {
        watching.abort();
      }
      expect(seen.length).toBeGreaterThan(0);
      const shortRun = await readRun(ns, short);
      // Code still executing RUNNING_WRITE_DELAY_MS after it started is adopted with its Running
      // status, rightly: this one ended long before (a print takes ~40 ms).
      expect(shortRun.status?.durationMs).toBeLessThan(RUNNING_WRITE_DELAY_MS);
      for (const v of seen) {
        expect(v.metadata?.labels).toEqual(pod?.metadata?.labels);
        expect(v.metadata?.annotations?.[ANNOTATION_RESERVED_BY]).toBe(mark);
        expect(v.metadata?.ownerReferences?.some((o) => o.kind === 'SandboxRun')).toBeFalsy();
      }
      await until(async () => (pod = (await reserved(ns))[0]) !== undefined, 60_000, 'the next reservation');
      // While the run executes, the pod becomes the run's (labelled claimed, owned by it): the
      // patch overlaps the execution instead of preceding it.
      const running = call(mcp, 'import socket, time\ntime.sleep(3)\nprint(socket.gethostname())');
      let adopted: V1Pod | undefined;
      await until(
        async () => {
          adopted = await k.core.readNamespacedPod({ namespace: ns, name: pod?.metadata?.name ?? '' }).catch(() => undefined);
          return adopted?.metadata?.labels?.[POOL] === 'claimed';
        },
        30_000,
        'the reserved pod adopted by its run',
      );
      expect(adopted?.metadata?.ownerReferences).toEqual([expect.objectContaining({ kind: 'SandboxRun', controller: true })]);
      expect(adopted?.metadata?.labels?.[LEGACY_RESERVED_LABEL]).toBeUndefined();
      expect(adopted?.metadata?.annotations?.[ANNOTATION_RESERVED_BY]).toBeUndefined();
      const r = await running;
      expect(host(r)).toBe(pod?.metadata?.name);
      // The run's record names the pod, which goes once the outcome is stored.
      await until(async () => gone(ns, pod?.metadata?.name ?? ''), 60_000, 'the used pod deleted');
      const run = await readRun(ns, r);
      expect(run.status).toMatchObject({ phase: 'Succeeded', podName: pod?.metadata?.name });
      expect(adopted?.metadata?.ownerReferences?.[0]?.uid).toBe(run.metadata.uid);
      // The pool keeps its size beside the reservation, and the next reservation follows.
      await until(async () => (await reserved(ns)).length === 1 && (await readyWarm(ns)).length === 2, 120_000, 'a new reservation and a full pool');
    } finally {
      await mcp.close();
      await op.stop();
    }
  }
});
