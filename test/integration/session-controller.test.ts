// SandboxSessionController.reconcile through a table of world states on the real API server,
// twice each (helpers/table.ts). A session's pod is a marker pod that can never be scheduled; no
// row makes the controller create a real kernel pod.
import { describe, expect, it } from 'vitest';
import { PatchStrategy, setHeaderOptions, type V1Pod } from '@kubernetes/client-node';
import {
  API_VERSION,
  GATEWAY_FIELD_MANAGER,
  GROUP,
  Reasons,
  SANDBOXSESSION_KIND,
  SANDBOXSESSION_PLURAL,
  SessionReasons,
  VERSION,
} from '../../src/api/v1alpha1/index.js';
import { KERNEL_LOST_NOTE } from '../../src/controller/session-controller.js';
import type { InstallResult } from '../../src/packages/installer.js';
import { InstallSlotsFull } from '../../src/packages/slots.js';
import { deleteNamespace, until } from '../e2e/helpers/kube.js';
import { sessionRig, type SessionRig } from './helpers/rig.js';
import { changed, clients, createNamespace, k, runRow, without, type Row } from './helpers/table.js';
import { TIME, buildWorld, markerPod, snapshot, type World } from './helpers/world.js';

const key = (name: string): string => `${SANDBOXSESSION_KIND}/${name}`;
const marker = (session: string): { name: string; owner: { kind: typeof SANDBOXSESSION_KIND; name: string } } => ({
  name: `sess-${session}`,
  owner: { kind: SANDBOXSESSION_KIND, name: session },
});
const spec = { language: 'python', idleTimeoutSeconds: 600 };
const ready = (at: (s: number) => string): Record<string, unknown> => ({
  phase: 'Ready',
  podName: 'sess-s',
  reason: SessionReasons.KernelReady,
  lastActivityTime: at(-5),
});

/** The session's status after the controller applied `status` (and the fields it always sets). */
function withStatus(name: string, status: Record<string, unknown>, extra: World = {}): (w: World) => World {
  return changed(
    name.includes('/') ? name : key(name),
    (s) => ({ ...s, status: { ...(s.status as object), observedGeneration: 1, expiresAt: TIME, ...status } }),
    extra,
  );
}

const condition = (status: 'True' | 'False', reason: string, message: unknown): unknown[] => [
  { type: 'Ready', status, reason, message, observedGeneration: 1, lastTransitionTime: TIME },
];
const event = (type: string, reason: string, action: string, note: unknown): World => ({ Events: [{ type, reason, action, note, regarding: key('s') }] });

const EDITED_PAST_LIMITS = 'Invalid SandboxSession: spec.idleTimeoutSeconds=1800 is above the maximum 1200: set it to at most 1200.';
const GONE = "The session's pod is gone, and its state with it. Create a new session.";
const OVER_CAP =
  'User alice already has 1 live session; the limit is 1 per user (CODEMODE_USER_MAX_SESSIONS), whether a session is made with create_session or kubectl. Delete a session you no longer need, then create this one again.';

/** Session s failed for its owner's session limit: its status and the Warning Event. */
const overCap = (): ReturnType<typeof withStatus> =>
  withStatus(
    's',
    {
      phase: 'Failed',
      podName: expect.any(String),
      reason: SessionReasons.UserSessionLimit,
      message: OVER_CAP,
      conditions: condition('False', SessionReasons.UserSessionLimit, OVER_CAP),
    },
    event('Warning', SessionReasons.UserSessionLimit, 'Start', OVER_CAP),
  );

/**
 * The session failed InvalidSpec with `message`: its status (its Ready condition False, when it
 * expires, as every failure says), no pod, no Event.
 */
const invalidSpec = (message: string): Row['expected'] =>
  withStatus('s', { phase: 'Failed', reason: Reasons.InvalidSpec, message, conditions: condition('False', Reasons.InvalidSpec, message) });

/** Session s Pending for its pod to start (its pod named, no second one). */
const podPending = (): Row['expected'] =>
  withStatus('s', {
    phase: 'Pending',
    podName: 'sess-s',
    reason: SessionReasons.PodPending,
    message: expect.any(String),
    conditions: condition('False', SessionReasons.PodPending, expect.any(String)),
  });

const rows: Row[] = [
  {
    name: 'a Ready session whose pod vanished: Lost (KernelLost), no new pod',
    world: ({ at }) => ({ sessions: [{ name: 's', spec, status: ready(at) }] }),
    key: 's',
    expected: withStatus(
      's',
      { phase: 'Lost', reason: SessionReasons.KernelLost, message: GONE, conditions: condition('False', SessionReasons.KernelLost, GONE) },
      event('Warning', SessionReasons.KernelLost, 'Start', GONE),
    ),
    requeued: true,
  },
  {
    name: 'the gateway saw the interpreter die: Lost, and its pod is deleted',
    world: ({ at }) => ({
      sessions: [{ name: 's', spec, status: { ...ready(at), kernelLost: { message: 'the exec stream closed', time: at(-1) } } }],
      pods: [marker('s')],
    }),
    key: 's',
    expected: (w) => {
      const message = 'The interpreter is gone (the exec stream closed). Create a new session.';
      return without('Pod/sess-s')(
        withStatus(
          's',
          { phase: 'Lost', reason: SessionReasons.KernelLost, message, conditions: condition('False', SessionReasons.KernelLost, message) },
          // The Event does not quote kernelLost (the sandbox's text): it points at the status.
          event('Warning', SessionReasons.KernelLost, 'Start', KERNEL_LOST_NOTE),
        )(w),
      );
    },
    requeued: true,
  },
  {
    name: 'a session idle past its timeout is deleted, with an Event',
    clockAheadSeconds: 3600,
    world: ({ at }) => ({ sessions: [{ name: 's', spec, status: ready(at) }] }),
    key: 's',
    expected: (w) => ({ ...without(key('s'))(w), ...event('Normal', SessionReasons.IdleTimeout, 'Delete', 'Deleted the session: idle for 600s.') }),
    requeued: false,
  },
  {
    name: 'a busy session past its maximum lifetime is deleted, with an Event',
    clockAheadSeconds: 120,
    world: ({ at }) => ({ sessions: [{ name: 's', spec: { ...spec, maxLifetimeSeconds: 60 }, status: { ...ready(at), lastActivityTime: at(110) } }] }),
    key: 's',
    expected: (w) => ({
      ...without(key('s'))(w),
      ...event('Normal', SessionReasons.LifetimeExceeded, 'Delete', 'Deleted the session: past its maximum lifetime.'),
    }),
    requeued: false,
  },
  {
    name: 'a new session whose pod exists and is not scheduled yet: Pending, no second pod',
    world: () => ({ sessions: [{ name: 's', spec }], pods: [marker('s')] }),
    key: 's',
    expected: podPending(),
    requeued: true,
  },
  {
    // Its idle timeout passed while its pod started (or its packages installed): no call could
    // have reached it, so it is not idle; the startup timeout bounds it.
    name: 'a session starting for longer than its idle timeout: Pending, not collected',
    clockAheadSeconds: 60,
    world: () => ({ sessions: [{ name: 's', spec: { ...spec, idleTimeoutSeconds: 10 } }], pods: [marker('s')] }),
    key: 's',
    expected: podPending(),
    requeued: true,
  },
  {
    name: 'a session whose pod did not start in time: Failed (Unschedulable), its pod deleted',
    clockAheadSeconds: 300,
    world: () => ({ sessions: [{ name: 's', spec, status: { phase: 'Pending', podName: 'sess-s', reason: SessionReasons.PodPending } }], pods: [marker('s')] }),
    key: 's',
    expected: (w) => {
      const message = expect.stringMatching(
        /^The session's pod did not start in time \(.*\)\. Try again later or ask the administrator to check the cluster's capacity\.$/,
      );
      return without('Pod/sess-s')(
        withStatus(
          's',
          { phase: 'Failed', reason: Reasons.Unschedulable, message, conditions: condition('False', Reasons.Unschedulable, message) },
          event('Warning', Reasons.Unschedulable, 'Start', message),
        )(w),
      );
    },
    requeued: true,
  },
  {
    name: "a session beyond the administrator's limits: Failed InvalidSpec, no pod created",
    env: { CODEMODE_SESSION_MAX_IDLE_TIMEOUT_SECONDS: '1200' },
    world: () => ({ sessions: [{ name: 's', spec: { ...spec, idleTimeoutSeconds: 1800 } }] }),
    key: 's',
    expected: invalidSpec('Invalid SandboxSession: spec.idleTimeoutSeconds=1800 is above the maximum 1200: set it to at most 1200.'),
    requeued: true,
  },
  {
    name: "a Ready session whose spec was edited past the administrator's limits: Failed InvalidSpec, and its pod deleted",
    env: { CODEMODE_SESSION_MAX_IDLE_TIMEOUT_SECONDS: '1200' },
    world: ({ at }) => ({ sessions: [{ name: 's', spec: { ...spec, idleTimeoutSeconds: 1800 }, status: ready(at) }], pods: [marker('s')] }),
    key: 's',
    expected: (w) =>
      without('Pod/sess-s')(
        withStatus('s', {
          phase: 'Failed',
          reason: Reasons.InvalidSpec,
          message: EDITED_PAST_LIMITS,
          conditions: condition('False', Reasons.InvalidSpec, EDITED_PAST_LIMITS),
        })(w),
      ),
    requeued: true,
  },
  {
    name: "a session left at the default idle timeout above the administrator's lower maximum: the message says where 600 came from",
    env: { CODEMODE_SESSION_MAX_IDLE_TIMEOUT_SECONDS: '300' },
    world: () => ({ sessions: [{ name: 's', spec: { language: 'python' } }] }),
    key: 's',
    expected: invalidSpec(
      'Invalid SandboxSession: spec.idleTimeoutSeconds=600 is above the maximum 300 (600 is its default when left out): set it to at most 300.',
    ),
    requeued: true,
  },
  {
    name: "a session beyond its owner's session limit (applied with kubectl): Failed UserSessionLimit, an Event, no pod",
    env: { CODEMODE_USER_MAX_SESSIONS: '1' },
    world: ({ at }) => ({
      sessions: [
        { name: 'a', spec: { ...spec, owner: { user: 'alice' } }, status: ready(at) },
        { name: 'b', spec: { ...spec, owner: { user: 'bob' } }, status: ready(at) },
        { name: 's', spec: { ...spec, owner: { user: 'alice' } } },
      ],
    }),
    key: 's',
    expected: overCap(),
    requeued: true,
  },
  {
    name: 'two sessions of one owner applied together at the limit: the later one fails, whichever is reconciled first',
    env: { CODEMODE_USER_MAX_SESSIONS: '1' },
    world: () => ({
      sessions: [
        { name: 'a', spec: { ...spec, owner: { user: 'alice' } } },
        { name: 's', spec: { ...spec, owner: { user: 'alice' } } },
      ],
    }),
    key: 's',
    expected: overCap(),
    requeued: true,
  },
  {
    name: 'a Lost session stays Lost: no new pod',
    world: ({ at }) => ({ sessions: [{ name: 's', spec, status: { ...ready(at), phase: 'Lost', reason: SessionReasons.KernelLost, message: GONE } }] }),
    key: 's',
    expected: withStatus('s', {}),
    requeued: true,
  },
];

describe('SandboxSession reconcile against the real API server', () => {
  // A loop rather than it.each: the rows' names are sentences, and it.each would cut them short.
  for (const row of rows) it(row.name, () => runRow(row, 'int-session', (ns, now, env) => sessionRig(clients, ns, now, env)));
});

describe('SandboxSession packages installed beside the workers', () => {
  it('reconciles a session whose install is slow without waiting for it: Pending while it runs, Ready once it ended', async () => {
    const ns = await createNamespace('int-session');
    let r: SessionRig | undefined;
    let finish: (r: InstallResult) => void = () => undefined;
    const installs: string[][] = [];
    const install = (_s: unknown, _pod: string, packages: readonly string[]): Promise<InstallResult> => {
      installs.push([...packages]);
      return new Promise((done) => (finish = done));
    };
    try {
      const start = Date.now();
      const at = (s: number): string => new Date(start + s * 1000).toISOString();
      await buildWorld(clients, ns, {
        sessions: [{ name: 's', spec: { ...spec, packages: ['tabulate'] }, status: { phase: 'Pending', podName: 'sess-s', lastActivityTime: at(-1) } }],
        pods: [{ ...marker('s'), phase: 'Ready' }],
      });
      r = await sessionRig(clients, ns, new Date(start), {}, { packages: { install } });
      await r.settle();
      // Four workers serve every session of the namespace: one must not wait out an install.
      const first = await Promise.race([r.controller.reconcile(`${ns}/s`), new Promise<'blocked'>((done) => setTimeout(() => done('blocked'), 5000))]);
      expect(first, 'the reconcile waited for the install').not.toBe('blocked');
      await r.settle();
      expect(installs).toEqual([['tabulate']]);
      const installing = (await snapshot(clients, ns))[key('s')] as { status: Record<string, unknown> };
      expect(installing.status).toMatchObject({ phase: 'Pending', reason: SessionReasons.PackagesInstalling });
      // Looked at again while it runs: the same install, nothing written.
      await r.controller.reconcile(`${ns}/s`);
      await r.settle();
      expect(installs).toHaveLength(1);

      finish({ ecosystem: 'pypi', installed: [], bytes: 0 });
      await new Promise((done) => setTimeout(done, 10));
      // The session cache stays behind the Ready write below: looked at again from that older
      // copy (Pending), the session is not installed into a second time.
      await r.freezeSessionCache();
      await r.controller.reconcile(`${ns}/s`);
      await r.settle();
      await r.controller.reconcile(`${ns}/s`);
      await r.settle();
      const after = await snapshot(clients, ns);
      expect((after[key('s')] as { status: Record<string, unknown> }).status).toMatchObject({ phase: 'Ready', reason: SessionReasons.KernelReady });
      expect(after.Events).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ reason: SessionReasons.PackagesInstalled }),
          expect.objectContaining({ reason: SessionReasons.KernelReady }),
        ]),
      );
      expect(installs).toHaveLength(1);
    } finally {
      finish({ ecosystem: 'pypi', installed: [], bytes: 0 });
      await r?.stop();
      await deleteNamespace(k, ns);
    }
  });
});

describe('SandboxSession pods against caches behind the API server', () => {
  const sessionApi = { group: GROUP, version: VERSION, plural: SANDBOXSESSION_PLURAL };
  const MERGE = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
  const READY_POD = { phase: 'Running', conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: new Date() }] };
  const start = Date.now();
  const at = (s: number): string => new Date(start + s * 1000).toISOString();
  const pendingIn = (podName: string): Record<string, unknown> => ({ phase: 'Pending', podName, reason: SessionReasons.PodPending });

  interface Here {
    ns: string;
    r: SessionRig;
    /** Session s as the API server has it. */
    status(): Promise<Record<string, unknown> | undefined>;
    /** A pod as the API server has it (undefined: none). */
    pod(name: string): Promise<V1Pod | undefined>;
    /** A ready pod session s owns, created behind the controller. */
    readyPod(name: string): Promise<void>;
  }

  /** Session s (and `pods`) in a namespace of its own, the controller's caches filled, then `body`. */
  async function behind(
    session: { spec?: Record<string, unknown>; status: Record<string, unknown> },
    pods: Parameters<typeof buildWorld>[2]['pods'],
    opts: { now?: Date; env?: Record<string, string> },
    body: (h: Here) => Promise<void>,
  ): Promise<void> {
    const ns = await createNamespace('int-session');
    let r: SessionRig | undefined;
    try {
      const uids = await buildWorld(clients, ns, { sessions: [{ name: 's', spec, ...session }], pods });
      r = await sessionRig(clients, ns, opts.now ?? new Date(start), opts.env);
      await r.settle();
      await body({
        ns,
        r,
        status: async () =>
          ((await clients.custom.getNamespacedCustomObject({ ...sessionApi, namespace: ns, name: 's' })) as { status?: Record<string, unknown> }).status,
        pod: (name) => clients.core.readNamespacedPod({ namespace: ns, name }).catch(() => undefined),
        readyPod: async (name) => {
          await clients.core.createNamespacedPod({ namespace: ns, body: markerPod({ name, owner: { kind: SANDBOXSESSION_KIND, name: 's' } }, uids) });
          await clients.core.patchNamespacedPodStatus({ namespace: ns, name, body: { status: READY_POD } }, MERGE);
        },
      });
    } finally {
      await r?.stop();
      await deleteNamespace(k, ns);
    }
  }

  /** Reconciles session s once, and gives a delete it sent time to land. */
  async function reconcileOnce(h: Here): Promise<void> {
    await h.r.controller.reconcile(`${h.ns}/s`);
    await h.r.settle();
    await new Promise((done) => setTimeout(done, 500));
  }

  async function expectKept(h: Here, name: string, what: string): Promise<void> {
    const kept = await h.pod(name);
    expect(kept, what).toBeDefined();
    expect(kept?.metadata?.deletionTimestamp, what).toBeUndefined();
  }

  it("deletes the pod it saw, never another one made since under the pod's name", () =>
    behind({ status: { ...ready(at), kernelLost: { message: 'the exec stream closed', time: at(-1) } } }, [marker('s')], {}, async (h) => {
      await h.r.freezePodCache();
      // Behind the cache: the pod is gone, and another pod took its name.
      await clients.core.deleteNamespacedPod({ namespace: h.ns, name: 'sess-s', gracePeriodSeconds: 0 });
      await until(async () => (await h.pod('sess-s')) === undefined, 10_000, 'the pod to be gone');
      await buildWorld(clients, h.ns, { pods: [{ name: 'sess-s' }] });
      const other = await h.pod('sess-s');
      expect(other, 'the new pod under the name').toBeDefined();

      await reconcileOnce(h);
      expect((await h.pod('sess-s'))?.metadata?.uid, 'another pod was deleted for session s').toBe(other?.metadata?.uid);
    }));

  // The pod cache showed the pod a reconcile had just claimed before the session cache showed the
  // status that recorded it: from the older copy that pod looked extra, and was deleted under a
  // session its user had just been told was ready (which then read Lost, "being deleted").
  it('never deletes the pod a status written since names, judging from an older copy of the session', () =>
    behind({ status: pendingIn('sess-s') }, [marker('s')], {}, async (h) => {
      await h.r.freezeSessionCache();
      // What another reconcile did meanwhile: a pod of the session's, recorded in its status.
      await h.readyPod('sess-new');
      await clients.custom.patchNamespacedCustomObjectStatus(
        { ...sessionApi, namespace: h.ns, name: 's', body: { status: { ...ready(at), podName: 'sess-new' } } },
        MERGE,
      );
      await h.r.settle();
      await reconcileOnce(h);
      await expectKept(h, 'sess-new', 'the pod the session runs in was deleted');
    }));

  it('neither fails a session nor deletes its pod for a spec past the limits that was edited back since', () =>
    behind(
      { spec: { ...spec, idleTimeoutSeconds: 1800 }, status: ready(at) },
      [marker('s')],
      { env: { CODEMODE_SESSION_MAX_IDLE_TIMEOUT_SECONDS: '1200' } },
      async (h) => {
        await h.r.freezeSessionCache();
        // Edited back within the limits; this replica's cache still has the copy past them.
        await clients.custom.patchNamespacedCustomObject({ ...sessionApi, namespace: h.ns, name: 's', body: { spec: { idleTimeoutSeconds: 600 } } }, MERGE);
        await reconcileOnce(h);
        expect(await h.status()).toMatchObject({ phase: 'Ready', podName: 'sess-s' });
        await expectKept(h, 'sess-s', "the session's pod was deleted");
      },
    ));

  // Another replica claims a replacement for the pod the status names, which is gone, and has not
  // written the status that records it yet: that pod is not an extra to delete. Once the session
  // is Lost (it claims nothing any more) its other pods go.
  it("leaves a session's other pods alone while the pod its status names is gone, and deletes them once it is Lost", () =>
    behind({ status: ready(at) }, [], {}, async (h) => {
      await h.readyPod('sess-other');
      await h.r.settle();
      await reconcileOnce(h);
      await expectKept(h, 'sess-other', 'the replacement being claimed was deleted');
      expect(await h.status()).toMatchObject({ phase: 'Lost', message: GONE });
      await h.r.controller.reconcile(`${h.ns}/s`);
      await until(
        async () => (await h.pod('sess-other'))?.metadata?.deletionTimestamp !== undefined || (await h.pod('sess-other')) === undefined,
        10_000,
        "the Lost session's other pod deleted",
      );
    }));

  // Ten minutes on: past the start-up allowance, within the session's lifetime.
  it('does not fail a session for its start-up time from a pod cache behind a pod that became ready', () =>
    behind({ status: pendingIn('sess-s') }, [marker('s')], { now: new Date(start + 600_000) }, async (h) => {
      await h.r.freezePodCache();
      await clients.core.patchNamespacedPodStatus({ namespace: h.ns, name: 'sess-s', body: { status: READY_POD } }, MERGE);
      await reconcileOnce(h);
      expect(await h.status()).toMatchObject({ phase: 'Ready', podName: 'sess-s' });
    }));

  it('keeps a Ready session whose pod the pod cache does not show yet Ready, reading the pod from the API', () =>
    behind({ status: ready(at) }, [], {}, async (h) => {
      await h.r.freezePodCache();
      await h.readyPod('sess-s');
      await reconcileOnce(h);
      expect(await h.status()).toMatchObject({ phase: 'Ready', podName: 'sess-s' });
      await expectKept(h, 'sess-s', "the session's pod was deleted");
    }));
});

describe('SandboxSession packages when no install slot is free', () => {
  const full = (): InstallSlotsFull => new InstallSlotsFull('4 installs are running on this server already.', 'Try again in a moment.');
  it.each([
    // Other sessions' installs hold every slot of the replica: the packages are not at fault.
    ['within its start budget: still Pending, installed on a later try', 0, { phase: 'Ready', reason: SessionReasons.KernelReady }, 2],
    // As long as a start with packages may take (startup + packages timeouts): then it fails.
    ['past its start budget: Failed PackagesFailed', 3600, { phase: 'Failed', reason: SessionReasons.PackagesFailed }, 1],
  ])('%s', async (_n, aheadSeconds, outcome, tries) => {
    const ns = await createNamespace('int-session');
    let r: SessionRig | undefined;
    let calls = 0;
    const install = async (): Promise<InstallResult> => {
      calls++;
      if (calls === 1) throw full();
      return { ecosystem: 'pypi', installed: [], bytes: 0 };
    };
    try {
      const start = Date.now();
      await buildWorld(clients, ns, {
        sessions: [{ name: 's', spec: { ...spec, packages: ['tabulate'] }, status: { phase: 'Pending', podName: 'sess-s' } }],
        pods: [{ ...marker('s'), phase: 'Ready' }],
      });
      r = await sessionRig(clients, ns, new Date(start + aheadSeconds * 1000), {}, { packages: { install } });
      await r.settle();
      const status = async (): Promise<Record<string, unknown>> => ((await snapshot(clients, ns))[key('s')] as { status: Record<string, unknown> }).status;
      // Until a reconcile finds the session Ready or Failed: the first starts the install, the
      // next sees it refused (and throws, to be retried with the work queue's backoff), ...
      for (let i = 0; i < 6 && !['Ready', 'Failed'].includes(String((await status()).phase)); i++) {
        await r.controller.reconcile(`${ns}/s`).catch((err: unknown) => expect(String(err)).toMatch(/installs are running on this server already/));
        await r.settle();
        await new Promise((done) => setTimeout(done, 10));
      }
      expect(await status()).toMatchObject(outcome);
      expect(calls).toBe(tries);
    } finally {
      await r?.stop();
      await deleteNamespace(k, ns);
    }
  });
});

describe('SandboxSession packages installed by one replica', () => {
  it('a replica that does not install (not the leader) keeps the session Pending and starts no install', async () => {
    const ns = await createNamespace('int-session');
    let r: SessionRig | undefined;
    let leader = false;
    const installs: string[][] = [];
    const install = async (_s: unknown, _pod: string, packages: readonly string[]): Promise<InstallResult> => {
      installs.push([...packages]);
      return { ecosystem: 'pypi', installed: [], bytes: 0 };
    };
    try {
      const start = Date.now();
      await buildWorld(clients, ns, {
        sessions: [{ name: 's', spec: { ...spec, packages: ['tabulate'] }, status: { phase: 'Pending', podName: 'sess-s' } }],
        pods: [{ ...marker('s'), phase: 'Ready' }],
      });
      r = await sessionRig(clients, ns, new Date(start), {}, { packages: { install }, installsHere: () => leader });
      await r.settle();
      await r.controller.reconcile(`${ns}/s`);
      await r.settle();
      // Every replica reconciles the session; two installs into it at once would race on its files.
      expect(installs).toEqual([]);
      expect(((await snapshot(clients, ns))[key('s')] as { status: Record<string, unknown> }).status).toMatchObject({
        phase: 'Pending',
        reason: SessionReasons.PackagesInstalling,
      });
      leader = true;
      await r.controller.reconcile(`${ns}/s`);
      await new Promise((done) => setTimeout(done, 10));
      await r.controller.reconcile(`${ns}/s`);
      await r.settle();
      expect(installs).toEqual([['tabulate']]);
      expect(((await snapshot(clients, ns))[key('s')] as { status: Record<string, unknown> }).status).toMatchObject({ phase: 'Ready' });
    } finally {
      await r?.stop();
      await deleteNamespace(k, ns);
    }
  });
});

describe('SandboxSession collection with a gateway clock behind the controller', () => {
  it("counts activity from when the API server stored it, not from the gateway replica's clock", { timeout: 60_000 }, async () => {
    const ns = await createNamespace('int-session');
    let r: SessionRig | undefined;
    try {
      // Older than its idle timeout (a creationTimestamp cannot be set: the row waits it out).
      // Ready (its marker pod never runs, and a Ready session's pod that has not failed keeps it so).
      await buildWorld(clients, ns, {
        sessions: [{ name: 's', spec: { ...spec, idleTimeoutSeconds: 10 }, status: { phase: 'Ready', podName: 'sess-s', reason: SessionReasons.KernelReady } }],
        pods: [marker('s')],
      });
      await new Promise((done) => setTimeout(done, 12_000));
      // A call just now, stamped by a replica whose clock is an hour behind.
      const stamped = new Date(Date.now() - 3600_000).toISOString();
      await clients.custom.patchNamespacedCustomObjectStatus(
        {
          group: GROUP,
          version: VERSION,
          plural: SANDBOXSESSION_PLURAL,
          namespace: ns,
          name: 's',
          body: {
            apiVersion: API_VERSION,
            kind: SANDBOXSESSION_KIND,
            metadata: { name: 's', namespace: ns },
            status: { lastActivityTime: stamped, runCount: 1 },
          },
          fieldManager: GATEWAY_FIELD_MANAGER,
          force: true,
        },
        setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
      );
      const now = Date.now();
      r = await sessionRig(clients, ns, new Date(now));
      await r.settle();
      const next = await r.controller.reconcile(`${ns}/s`);
      await r.settle();
      const after = (await clients.custom
        .getNamespacedCustomObject({ group: GROUP, version: VERSION, plural: SANDBOXSESSION_PLURAL, namespace: ns, name: 's' })
        .catch(() => undefined)) as { status?: { expiresAt?: string } } | undefined;
      expect(after, 'the session used a moment ago was deleted as idle for an hour').toBeDefined();
      // Idle from the stored write (whole seconds, less one): 8-10 s from now.
      expect(Date.parse(after?.status?.expiresAt ?? '')).toBeGreaterThan(now + 7_000);
      expect(next?.requeueAfterMs).toBeGreaterThan(0);
    } finally {
      await r?.stop();
      await deleteNamespace(k, ns);
    }
  });
});

describe('SandboxSession collection against a cache behind the API server', () => {
  it('does not delete a session whose activity another replica recorded after the copy judged idle', async () => {
    const ns = await createNamespace('int-session');
    let r: SessionRig | undefined;
    try {
      const start = Date.now();
      const at = (s: number): string => new Date(start + s * 1000).toISOString();
      await buildWorld(clients, ns, { sessions: [{ name: 's', spec, status: ready(at) }] });
      // The controller's clock an hour on: the cached copy (last used 5 s before the start) is idle.
      r = await sessionRig(clients, ns, new Date(start + 3600_000));
      await r.settle();
      await r.freezeSessionCache();
      // A call through another replica, recorded before this cache hears of it.
      await clients.custom.patchNamespacedCustomObjectStatus(
        { group: GROUP, version: VERSION, plural: SANDBOXSESSION_PLURAL, namespace: ns, name: 's', body: { status: { lastActivityTime: at(3600) } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      const next = await r.controller.reconcile(`${ns}/s`);
      await r.settle();
      const after = await snapshot(clients, ns);
      expect(after[key('s')], 'the session used a moment ago was deleted').toBeDefined();
      expect(after.Events).toBeUndefined();
      // Judged again soon, from the copy the cache will have by then.
      expect(next?.requeueAfterMs).toBeGreaterThan(0);
    } finally {
      await r?.stop();
      await deleteNamespace(k, ns);
    }
  });
});
