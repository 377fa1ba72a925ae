// SandboxSessionController.reconcile through a table of world states on the real API server,
// twice each (helpers/table.ts). A session's pod is a marker pod that can never be scheduled; no
// row makes the controller create a real kernel pod.
import { describe, expect, it } from 'vitest';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
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
import { deleteNamespace } from '../e2e/helpers/kube.js';
import { sessionRig, type SessionRig } from './helpers/rig.js';
import { changed, clients, createNamespace, k, runRow, without, type Row } from './helpers/table.js';
import { TIME, buildWorld, snapshot, type World } from './helpers/world.js';

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
    expected: withStatus('s', {
      phase: 'Pending',
      podName: 'sess-s',
      reason: SessionReasons.PodPending,
      message: expect.any(String),
      conditions: condition('False', SessionReasons.PodPending, expect.any(String)),
    }),
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
      await buildWorld(clients, ns, { sessions: [{ name: 's', spec: { ...spec, idleTimeoutSeconds: 10 } }], pods: [marker('s')] });
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
