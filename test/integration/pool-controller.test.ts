// PoolController.reconcile (the leader's pass: refill, replace, drain, sweep runtime ConfigMaps)
// through a table of world states on the real API server, twice each (helpers/table.ts), without
// the leader election and with a fixed clock (helpers/pool-rig.ts). Pool pods are markers that
// never run, whether the row made them or the controller did (the rig gates the controller's
// pods); every delete the controller sends must carry uid and resourceVersion preconditions.
import type { KubernetesObject } from '@kubernetes/client-node';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { API_VERSION, GROUP, SANDBOXRUN_KIND, SANDBOXRUN_PLURAL, SANDBOXSESSION_KIND, VERSION } from '../../src/api/v1alpha1/index.js';
import { LABEL_MANAGED_BY, LABEL_PROFILE, LABEL_RUN, LABEL_RUNTIME, LABEL_SANDBOX, LABEL_SESSION, MANAGED_BY_VALUE } from '../../src/api/v1alpha1/labels.js';
import { BUILTIN_PROFILE } from '../../src/api/v1alpha1/index.js';
import { ANNOTATION_UNUSED_SINCE } from '../../src/controller/runtime-guard.js';
import { SWEEP_GRACE_MS } from '../../src/controller/runtime-sweep.js';
import { LABEL_POOL, LABEL_POOL_HASH, POOL_LANGUAGE } from '../../src/sandbox/pod.js';
import { LABEL_RUNTIME_HASH, buildRuntimeConfigMap, runtimeVolume } from '../../src/sandbox/runtime-configmap.js';
import { filesHash } from '../../src/sandbox/template-hash.js';
import { runLabelValue } from '../../src/sandbox/names.js';
import { RUNTIME_FILES, currentPoolPod, poolRig, type PoolRigHooks } from './helpers/pool-rig.js';
import { changed, clients, createNamespace, k, runRow, without, type Row } from './helpers/table.js';
import { deleteNamespace } from '../e2e/helpers/kube.js';
import { MARKER_GATE, buildWorld, setMarkerPhase, type MarkerSpec, type World } from './helpers/world.js';

/** This checkout's pool pods: their template hash and deadline (the same for every row's pool size). */
const { hash: HASH, deadlineSeconds: DEADLINE } = currentPoolPod();
const OLD = 'old0template';
const RUNTIME_CM = runtimeVolume(RUNTIME_FILES).configMap;
const spec = { language: 'python', code: 'print(1)', timeoutSeconds: 30 };

const poolLabels = (hash: string, state: 'warm' | 'claimed'): Record<string, string> => ({
  [LABEL_POOL]: state,
  [LABEL_RUNTIME]: POOL_LANGUAGE,
  [LABEL_POOL_HASH]: hash,
  [LABEL_SANDBOX]: 'true',
  // The built-in profile's pool (pods of other profiles are other pools').
  [LABEL_PROFILE]: BUILTIN_PROFILE,
});
const warm = (name: string, hash = HASH): MarkerSpec => ({ name, labels: poolLabels(hash, 'warm') });
/** A pool pod another replica claimed for run `run` (or session `session`). */
const claimed = (name: string, by: { run?: string; session?: string }, hash = HASH, mounts?: string): MarkerSpec => ({
  name,
  labels: poolLabels(hash, 'claimed'),
  owner: by.run ? { kind: SANDBOXRUN_KIND, name: by.run } : { kind: SANDBOXSESSION_KIND, name: by.session ?? '' },
  ...(mounts && { mounts }),
});

/** A pool pod the controller created, as the snapshot shows it (Pending behind the rig's gate). */
const created = {
  metadata: { labels: { [LABEL_MANAGED_BY]: MANAGED_BY_VALUE, ...poolLabels(HASH, 'warm') } },
  phase: 'Pending',
  gated: [MARKER_GATE],
  // Unowned until claimed, so a deadline ends it even if the operator is gone.
  deadline: DEADLINE,
};
const RUNTIME_LABELS = { [LABEL_MANAGED_BY]: MANAGED_BY_VALUE, [LABEL_RUNTIME_HASH]: filesHash(RUNTIME_FILES) };
const runtimeCm = (): unknown => ({ metadata: { labels: RUNTIME_LABELS } });
/** This version's runtime ConfigMap as the operator makes it, to seed a world with. */
const runtimeCmSeed = (): { name: string; labels: Record<string, string>; data: Record<string, string>; immutable: true } => ({
  name: RUNTIME_CM,
  labels: RUNTIME_LABELS,
  data: buildRuntimeConfigMap('', RUNTIME_FILES).data ?? {},
  immutable: true,
});

/** What a refill that creates `n` pods adds: the pods and this version's runtime ConfigMap. */
function refilled(n: number): (w: World) => World {
  return (w) => {
    const out: World = { ...w, [`ConfigMap/${RUNTIME_CM}`]: w[`ConfigMap/${RUNTIME_CM}`] ?? runtimeCm() };
    for (let i = 1; i <= n; i++) out[`Pod/codemode-pool-${POOL_LANGUAGE}-#${i}`] = created;
    return out;
  };
}

const gone =
  (...names: string[]) =>
  (w: World): World =>
    names.reduce((acc, n) => without(`Pod/${n}`)(acc), w);

const oldCm = (name: string, annotations?: Record<string, string>): { name: string; labels: Record<string, string>; annotations?: Record<string, string> } => ({
  name,
  labels: { [LABEL_MANAGED_BY]: MANAGED_BY_VALUE, [LABEL_RUNTIME_HASH]: 'old' },
  ...(annotations && { annotations }),
});

/**
 * Another replica claims `pod` for run `run` just before the leader's delete of it lands: the
 * leader decided on the pod as its informer showed it (unclaimed), the claim changed it since.
 */
function claimedBeforeDelete(pod: string, run: string): PoolRigHooks {
  return {
    async beforeDelete(namespace, what): Promise<void> {
      if (what !== `Pod/${pod}`) return;
      const r = (await clients.custom.getNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        plural: SANDBOXRUN_PLURAL,
        namespace,
        name: run,
      })) as KubernetesObject;
      const owner = { apiVersion: API_VERSION, kind: SANDBOXRUN_KIND, name: run, uid: r.metadata?.uid ?? '', controller: true, blockOwnerDeletion: true };
      await clients.core.patchNamespacedPod(
        { namespace, name: pod, body: { metadata: { labels: { [LABEL_POOL]: 'claimed', [LABEL_RUN]: runLabelValue(run) }, ownerReferences: [owner] } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
    },
  };
}

const rows: Array<Row & { hooks?: PoolRigHooks }> = [
  {
    name: 'an empty pool is filled to its minimum with pods of this template, after its runtime ConfigMap',
    world: () => ({}),
    key: 'pool',
    expected: refilled(2),
    requeued: true,
  },
  {
    name: 'unclaimed pods of an older template, ready or starting, are deleted and replaced by pods of this template',
    world: () => ({ pods: [{ ...warm('old-ready', OLD), phase: 'Ready' }, warm('old-starting', OLD)] }),
    key: 'pool',
    expected: (w) => refilled(2)(gone('old-ready', 'old-starting')(w)),
    requeued: true,
  },
  {
    name: 'a failed unclaimed pod of this template is deleted and replaced',
    world: () => ({ pods: [{ ...warm('failed'), phase: 'Failed' }, warm('fine')] }),
    key: 'pool',
    expected: (w) => refilled(1)(gone('failed')(w)),
    requeued: true,
  },
  {
    name: 'a claimed pod of an older template is left to its run; the pool is filled beside it',
    world: () => ({ runs: [{ name: 'r', spec }], pods: [claimed('old-claimed', { run: 'r' }, OLD)] }),
    key: 'pool',
    expected: refilled(2),
    requeued: true,
  },
  {
    name: 'surplus unclaimed pods: those still starting go first, then the oldest; a claimed pod of this template is never touched',
    env: { CODEMODE_WARM_POOL_MIN: '1' },
    world: () => ({
      sessions: [{ name: 's' }],
      podsSecondsApart: true,
      pods: [claimed('claimed', { session: 's' }), { ...warm('a'), phase: 'Ready' }, { ...warm('b'), phase: 'Ready' }, warm('c-starting')],
    }),
    key: 'pool',
    expected: gone('a', 'c-starting'),
    requeued: true,
  },
  {
    name: 'a surplus pod claimed by another replica just before the delete lands is not deleted (uid and resourceVersion preconditions)',
    env: { CODEMODE_WARM_POOL_MIN: '1' },
    world: () => ({
      runs: [{ name: 'r', spec }],
      podsSecondsApart: true,
      pods: [
        { ...warm('oldest'), phase: 'Ready' },
        { ...warm('newest'), phase: 'Ready' },
      ],
    }),
    hooks: claimedBeforeDelete('oldest', 'r'),
    key: 'pool',
    expected: changed('Pod/oldest', (p) => {
      const meta = p.metadata as { labels: Record<string, string> };
      return {
        ...p,
        metadata: { ...meta, labels: { ...meta.labels, [LABEL_POOL]: 'claimed', [LABEL_RUN]: runLabelValue('r') }, owners: ['SandboxRun/r (controller)'] },
      };
    }),
    requeued: true,
  },
  {
    name: 'pool size 0 drains the pool: unclaimed pods of every template deleted, claimed ones kept, nothing created',
    env: { CODEMODE_WARM_POOL_MIN: '0', CODEMODE_WARM_POOL_MAX: '0' },
    world: () => ({
      runs: [{ name: 'r', spec }],
      pods: [warm('current-1'), warm('current-2'), warm('old-1', OLD), claimed('claimed', { run: 'r' })],
    }),
    key: 'pool',
    expected: gone('current-1', 'current-2', 'old-1'),
    requeued: true,
  },
  {
    name: 'demand sizes the pool between its bounds: 4 claims just seen (0.8/s × 2 s to ready × 1.5) → 3 pods, above the minimum 1',
    env: { CODEMODE_WARM_POOL_MIN: '1', CODEMODE_WARM_POOL_MAX: '4', CODEMODE_WARM_POOL_REFILL_DEFER_MS: '0' },
    world: () => ({}),
    meanwhile: () => ({ pods: ['c1', 'c2', 'c3', 'c4'].map((n) => ({ name: n, labels: poolLabels(HASH, 'claimed') })) }),
    key: 'pool',
    expected: refilled(3),
    requeued: true,
  },
  {
    name: 'demand beyond the maximum: 8 claims just seen ask for 5 pods, the pool stops at its maximum 4',
    env: { CODEMODE_WARM_POOL_MIN: '1', CODEMODE_WARM_POOL_MAX: '4', CODEMODE_WARM_POOL_REFILL_DEFER_MS: '0' },
    world: () => ({}),
    meanwhile: () => ({ pods: ['c1', 'c2', 'c3', 'c4', 'c5', 'c6', 'c7', 'c8'].map((n) => ({ name: n, labels: poolLabels(HASH, 'claimed') })) }),
    key: 'pool',
    expected: refilled(4),
    requeued: true,
  },
  {
    name: "another version's runtime ConfigMap still mounted is kept; an unused one is marked unused (the controller's clock)",
    env: { CODEMODE_WARM_POOL_MIN: '1' },
    world: () => ({
      sessions: [{ name: 's' }],
      configMaps: [oldCm('codemode-runtime-old-used'), oldCm('codemode-runtime-old-unused'), { name: 'not-runtime' }],
      pods: [claimed('old-session', { session: 's' }, OLD, 'codemode-runtime-old-used'), warm('current')],
    }),
    key: 'pool',
    expected: (w, { at }) => ({
      ...w,
      'ConfigMap/codemode-runtime-old-unused': { metadata: { labels: oldCm('').labels, annotations: { [ANNOTATION_UNUSED_SINCE]: at(0) } } },
    }),
    requeued: true,
  },
  {
    name: 'an unused runtime ConfigMap marked longer than its grace ago is deleted; one marked within its grace is kept',
    env: { CODEMODE_WARM_POOL_MIN: '1' },
    world: ({ at }) => ({
      configMaps: [
        oldCm('codemode-runtime-expired', { [ANNOTATION_UNUSED_SINCE]: at(-SWEEP_GRACE_MS / 1000 - 1) }),
        oldCm('codemode-runtime-recent', { [ANNOTATION_UNUSED_SINCE]: at(-60) }),
      ],
      pods: [warm('current')],
    }),
    key: 'pool',
    expected: without('ConfigMap/codemode-runtime-expired'),
    requeued: true,
  },
  {
    name: "this version's runtime ConfigMap, marked unused while it had no pods, is cleared when the refill mounts it again",
    env: { CODEMODE_WARM_POOL_MIN: '1' },
    world: ({ at }) => ({
      configMaps: [{ ...runtimeCmSeed(), annotations: { [ANNOTATION_UNUSED_SINCE]: at(-60) } }],
    }),
    key: 'pool',
    expected: (w) => refilled(1)({ ...w, [`ConfigMap/${RUNTIME_CM}`]: runtimeCm() }),
    requeued: true,
  },
  {
    // Its name is public (the hash of the released files): someone who may create ConfigMaps could
    // have put other content there first. Deleted (with preconditions) and made again; never mounted.
    name: "a ConfigMap under this version's runtime name with other content is replaced by the runtime",
    env: { CODEMODE_WARM_POOL_MIN: '1' },
    world: () => ({ configMaps: [{ name: RUNTIME_CM, labels: RUNTIME_LABELS, data: { 'kernel.py': 'print("not the kernel")' } }] }),
    key: 'pool',
    expected: (w) => refilled(1)({ ...w, [`ConfigMap/${RUNTIME_CM}`]: runtimeCm() }),
    requeued: true,
  },
];

describe('warm-pool reconcile (the leader pass) against the real API server', () => {
  for (const row of rows) it(row.name, () => runRow(row, 'int-pool', (ns, now, env) => poolRig(clients, ns, now, env, row.hooks)));
});

// Each sandbox pod runs as a user of its own (sandboxUid): the kernel counts some resources per
// user across the node. One template object for every create gave a pool's pods all one user.
it('creates each pool pod with a user of its own, all of the pool shape', async () => {
  const ns = await createNamespace('int-pool-users');
  const rig = await poolRig(clients, ns, new Date(), { CODEMODE_WARM_POOL_MIN: '3' });
  try {
    await rig.controller.reconcile(ns);
    await rig.settle();
    const pods = (await clients.core.listNamespacedPod({ namespace: ns, labelSelector: `${LABEL_POOL}=warm` })).items;
    expect(pods.map((p) => p.metadata?.labels?.[LABEL_POOL_HASH])).toEqual([HASH, HASH, HASH]);
    const users = pods.map((p) => p.spec?.securityContext?.runAsUser);
    expect(new Set(users).size, `pod users ${users.join(', ')}`).toBe(3);
    expect(pods.map((p) => p.spec?.containers[0]?.securityContext?.runAsUser)).toEqual(users);
  } finally {
    await rig.stop();
    await deleteNamespace(k, ns);
  }
});

// A claim against a cache behind the API server (CI saw a session go cold beside a ready pool pod):
// the cache still shows the pod starting, for longer than a claim waits for one, while the API
// server has it ready. The claim asks the API server before its caller goes cold.
it('claims a pool pod the API server has ready while the cache still shows it starting', async () => {
  const ns = await createNamespace('int-pool-behind');
  // The rig's clock a minute past the pod's creation: a pod starting that long is not waited for.
  const rig = await poolRig(clients, ns, new Date(Date.now() + 60_000), { CODEMODE_WARM_POOL_MIN: '1' });
  try {
    const uids = await buildWorld(clients, ns, { sessions: [{ name: 's', spec: { language: 'python' } }], pods: [warm('pool-a')] });
    await rig.settle();
    await rig.freezePodCache();
    await setMarkerPhase(clients, ns, 'pool-a', 'Ready');
    const uid = uids.get(`${SANDBOXSESSION_KIND}/s`) ?? '';
    const owner = { apiVersion: API_VERSION, kind: SANDBOXSESSION_KIND, name: 's', uid, controller: true, blockOwnerDeletion: true };
    const pod = await rig.pool.claim(owner, { [LABEL_SESSION]: 's' }, 600);
    expect(pod?.metadata?.name).toBe('pool-a');
    const live = await clients.core.readNamespacedPod({ namespace: ns, name: 'pool-a' });
    expect(live.metadata?.labels?.[LABEL_POOL]).toBe('claimed');
    expect(live.metadata?.ownerReferences?.map((o) => o.uid)).toEqual([uid]);
  } finally {
    await rig.stop();
    await deleteNamespace(k, ns);
  }
});
