// SandboxRunController.reconcile through a table of world states on the real API server, twice
// each (helpers/table.ts). No row lets code execute: where a run has "started", a marker pod that
// can never be scheduled stands for its sandbox pod, as the durable fact run-decision.ts reads.
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { GROUP, Reasons, SANDBOXRUN_KIND, SANDBOXRUN_PLURAL, VERSION, type SandboxRun } from '../../src/api/v1alpha1/index.js';
import { ANNOTATION_CLAIMED_AT, ANNOTATION_EXECUTOR, ANNOTATION_RECOVERING_FROM } from '../../src/api/v1alpha1/labels.js';
import { LEADER_LEASE } from '../../src/controller/pool-controller.js';
import { EXECUTOR_GONE_MESSAGE, VANISHED_MESSAGE } from '../../src/controller/run-decision.js';
import { IDENTITY, runRig } from './helpers/rig.js';
import { changed, clients, createNamespace, k, runRow, without, type Row } from './helpers/table.js';
import { deleteNamespace } from '../e2e/helpers/kube.js';
import { buildWorld, snapshot, TIME, type World } from './helpers/world.js';

const OTHER = 'other-replica-0';
const spec = { language: 'python', code: 'print(1)', timeoutSeconds: 30 };
/** Beyond every run's lost deadline (pod start-up 120 s + timeout 30 s + 60 s). */
const HOUR = 3600;

const runKey = (name: string): string => `${SANDBOXRUN_KIND}/${name}`;
const marker = (run: string): { name: string; owner: { kind: typeof SANDBOXRUN_KIND; name: string } } => ({
  name: `sbr-${run}`,
  owner: { kind: SANDBOXRUN_KIND, name: run },
});

/**
 * A run the controller failed: claimed by this replica, Failed with `reason` and `message`, and an
 * Event that says so. A run that had started keeps its startTime and gets no durationMs (how long
 * the code ran is unknown when its executor vanished). A run claimed from another executor (or from
 * none) to be failed says from whom (ANNOTATION_RECOVERING_FROM): no later look executes it.
 */
function failedBy(name: string, reason: string, message: string, claimedHere = false, recoveringFrom?: string): (w: World) => World {
  return (w) => {
    const run = w[runKey(name)] as Record<string, unknown>;
    const meta = run.metadata as { annotations?: Record<string, string> };
    const status = (run.status ?? {}) as Record<string, unknown>;
    const events = [
      ...((w.Events as unknown[] | undefined) ?? []),
      { type: 'Warning', reason: 'Failed', action: 'Complete', note: message, regarding: runKey(name) },
    ];
    return {
      ...w,
      [runKey(name)]: {
        ...run,
        metadata: {
          ...meta,
          annotations: {
            ...meta.annotations,
            [ANNOTATION_EXECUTOR]: IDENTITY,
            ...(claimedHere && { [ANNOTATION_CLAIMED_AT]: TIME }),
            ...(recoveringFrom !== undefined && { [ANNOTATION_RECOVERING_FROM]: recoveringFrom }),
          },
        },
        status: {
          ...status,
          phase: 'Failed',
          reason,
          message,
          observedGeneration: 1,
          completionTime: TIME,
          conditions: [
            { type: 'Complete', status: 'True', reason, message, observedGeneration: 1, lastTransitionTime: TIME },
            {
              type: 'Ready',
              status: 'False',
              reason,
              message: 'The run is finished; its sandbox pod is released.',
              observedGeneration: 1,
              lastTransitionTime: TIME,
            },
          ],
        },
      },
      Events: events,
    };
  };
}

const LIMITS_MESSAGE =
  'Invalid SandboxRun: spec.timeoutSeconds: timeout 120s is above the maximum of 60s; use a timeout of at most 60 seconds, or split the work into shorter runs.';

const running = (at: (s: number) => string): Record<string, unknown> => ({ phase: 'Running', podName: 'sbr-r', startTime: at(-5), reason: 'PodRunning' });

const rows: Row[] = [
  {
    name: 'a terminal run past its TTL is deleted',
    world: ({ at }) => ({
      runs: [{ name: 'r', spec: { ...spec, ttlSecondsAfterFinished: 60 }, status: { phase: 'Succeeded', reason: 'Succeeded', completionTime: at(-120) } }],
    }),
    key: 'r',
    expected: without(runKey('r')),
    requeued: false,
  },
  {
    name: "a terminal run within its own TTL but past the administrator's maximum TTL is deleted",
    env: { CODEMODE_TTL_SECONDS_AFTER_FINISHED: '30', CODEMODE_MAX_TTL_SECONDS_AFTER_FINISHED: '60' },
    world: ({ at }) => ({
      runs: [{ name: 'r', spec: { ...spec, ttlSecondsAfterFinished: 600 }, status: { phase: 'TimedOut', reason: 'TimedOut', completionTime: at(-120) } }],
    }),
    key: 'r',
    expected: without(runKey('r')),
    requeued: false,
  },
  {
    name: 'a terminal run within its TTL is left as it is, and looked at again when the TTL ends',
    world: ({ at }) => ({
      runs: [{ name: 'r', spec: { ...spec, ttlSecondsAfterFinished: 600 }, status: { phase: 'Failed', reason: 'NonZeroExit', completionTime: at(-10) } }],
    }),
    key: 'r',
    expected: (w) => w,
    requeued: true,
  },
  {
    name: 'a run whose executor vanished, its pod marker left, past its deadline: Failed, never started again',
    clockAheadSeconds: HOUR,
    world: ({ at }) => ({ runs: [{ name: 'r', spec, annotations: { [ANNOTATION_EXECUTOR]: OTHER }, status: running(at) }], pods: [marker('r')] }),
    key: 'r',
    expected: failedBy('r', Reasons.ExecFailed, VANISHED_MESSAGE, false, OTHER),
    requeued: true,
  },
  {
    name: 'a run started by this replica, no longer executing here, past its deadline: Failed, never started again',
    clockAheadSeconds: HOUR,
    world: () => ({ runs: [{ name: 'r', spec, annotations: { [ANNOTATION_EXECUTOR]: IDENTITY } }], pods: [marker('r')] }),
    key: 'r',
    expected: failedBy('r', Reasons.ExecFailed, VANISHED_MESSAGE),
    requeued: true,
  },
  {
    name: 'a run started by this replica, no longer executing here, within its deadline: left to its outcome',
    world: () => ({ runs: [{ name: 'r', spec, annotations: { [ANNOTATION_EXECUTOR]: IDENTITY } }], pods: [marker('r')] }),
    key: 'r',
    expected: (w) => w,
    requeued: true,
  },
  {
    name: 'a run with a pod marker and no executor annotation (removed): Failed at once, never started again',
    world: () => ({ runs: [{ name: 'r', spec }], pods: [marker('r')] }),
    key: 'r',
    expected: failedBy('r', Reasons.ExecFailed, VANISHED_MESSAGE, false, ''),
    requeued: true,
  },
  {
    name: 'a Running run with no pod, past its deadline: Failed with a reason',
    clockAheadSeconds: HOUR,
    world: ({ at }) => ({ runs: [{ name: 'r', spec, annotations: { [ANNOTATION_EXECUTOR]: OTHER }, status: running(at) }] }),
    key: 'r',
    expected: failedBy('r', Reasons.ExecFailed, VANISHED_MESSAGE, false, OTHER),
    requeued: true,
  },
  {
    name: 'a Running run in a session, past its deadline: Failed, never sent to the session again',
    clockAheadSeconds: HOUR,
    world: ({ at }) => ({
      runs: [{ name: 'r', spec: { ...spec, session: 's' }, annotations: { [ANNOTATION_EXECUTOR]: OTHER }, status: { ...running(at), podName: undefined } }],
    }),
    key: 'r',
    expected: failedBy('r', Reasons.ExecFailed, VANISHED_MESSAGE, false, OTHER),
    requeued: true,
  },
  {
    name: 'a run executed by another live replica (it holds the leader Lease) within its deadline is left alone',
    world: ({ at }) => ({
      runs: [{ name: 'r', spec, annotations: { [ANNOTATION_EXECUTOR]: OTHER }, status: running(at) }],
      pods: [marker('r')],
      leases: [{ name: LEADER_LEASE, holder: OTHER, renewTime: at(-1), durationSeconds: 15 }],
    }),
    key: 'r',
    expected: (w) => w,
    requeued: true,
  },
  {
    name: "a run beyond the administrator's limits: claimed, Failed InvalidSpec, no pod created",
    env: { CODEMODE_MAX_TIMEOUT_SECONDS: '60' },
    world: () => ({ runs: [{ name: 'r', spec: { ...spec, timeoutSeconds: 120 } }] }),
    key: 'r',
    expected: failedBy('r', Reasons.InvalidSpec, LIMITS_MESSAGE, true),
    requeued: true,
  },
  {
    name: 'a run claimed by this replica and never started (no marker): executed — here refused by the limits, so no pod',
    env: { CODEMODE_MAX_TIMEOUT_SECONDS: '60' },
    world: () => ({ runs: [{ name: 'r', spec: { ...spec, timeoutSeconds: 120 }, annotations: { [ANNOTATION_EXECUTOR]: IDENTITY } }] }),
    key: 'r',
    expected: failedBy('r', Reasons.InvalidSpec, LIMITS_MESSAGE),
    requeued: true,
  },
  {
    // Its first executor was judged gone and this replica claimed the run to fail it, but the claim's
    // answer was lost (or its status write refused): "mine, no marker" must not execute it — its
    // code may have started in that executor's reserved pod. Executed, the limits would refuse it.
    name: 'a run this replica claimed to fail (its executor gone), no marker: Failed again, never executed',
    env: { CODEMODE_MAX_TIMEOUT_SECONDS: '60' },
    world: () => ({
      runs: [{ name: 'r', spec: { ...spec, timeoutSeconds: 120 }, annotations: { [ANNOTATION_EXECUTOR]: IDENTITY, [ANNOTATION_RECOVERING_FROM]: OTHER } }],
    }),
    key: 'r',
    expected: failedBy('r', Reasons.ExecFailed, EXECUTOR_GONE_MESSAGE),
    requeued: true,
  },
  {
    name: "a kubectl run while the namespace's run slots are full: Pending, Queued, nothing started",
    env: { CODEMODE_MAX_NAMESPACE_RUNS: '1', CODEMODE_MAX_CONCURRENT_RUNS: '1' },
    world: ({ at }) => ({
      runs: [
        { name: 'busy', spec, annotations: { [ANNOTATION_EXECUTOR]: OTHER }, status: { ...running(at), podName: 'sbr-busy' } },
        { name: 'r', spec },
      ],
      pods: [marker('busy')],
    }),
    key: 'r',
    expected: changed(runKey('r'), (run) => ({
      ...run,
      status: {
        phase: 'Pending',
        reason: Reasons.Queued,
        message: expect.stringMatching(/^Waiting for a free run slot: 1 of 1 runs are executing in namespace .*\. The run starts when one is free\.$/),
        observedGeneration: 1,
        conditions: [{ type: 'Ready', status: 'False', reason: Reasons.Queued, message: expect.any(String), observedGeneration: 1, lastTransitionTime: TIME }],
      },
    })),
    requeued: true,
  },
];

describe('SandboxRun reconcile against the real API server', () => {
  // A loop rather than it.each: the rows' names are sentences, and it.each would cut them short.
  for (const row of rows) it(row.name, () => runRow(row, 'int-run', (ns, now, env) => runRig(clients, ns, now, env)));
});

describe('SandboxRun reconcile from a cache behind the API server', () => {
  // Found by the kube-apiserver restart fault: the watches broke, the pod cache saw this replica
  // delete a finished run's pod while the run cache still held the run from before its outcome —
  // mine, no marker, "never started" — and the run was executed a second time, in a second pod.
  it('a run this replica finished is not started again while its cached copy predates the outcome', async () => {
    const ns = await createNamespace('int-stale');
    // The limits refuse the run if it is ever executed again: that would write Failed over its outcome.
    const r = await runRig(clients, ns, new Date(), { CODEMODE_MAX_TIMEOUT_SECONDS: '60' });
    try {
      await buildWorld(clients, ns, { runs: [{ name: 'r', spec: { ...spec, timeoutSeconds: 120 }, annotations: { [ANNOTATION_EXECUTOR]: IDENTITY } }] });
      await r.settle();
      await r.freezeRunCache();
      // Its outcome, recorded by this replica (its pod, already gone, never reached the cache).
      const outcome = {
        phase: 'Succeeded',
        reason: Reasons.Succeeded,
        message: 'The code ran to completion.',
        exitCode: 0,
        completionTime: new Date().toISOString(),
      };
      await clients.custom.patchNamespacedCustomObjectStatus(
        { group: GROUP, version: VERSION, namespace: ns, plural: SANDBOXRUN_PLURAL, name: 'r', body: { status: outcome } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      const before = await snapshot(clients, ns);

      const res = await r.controller.reconcile(`${ns}/r`);
      await r.settle();

      expect(await snapshot(clients, ns)).toEqual(before);
      // Looked at again once the cache has caught up (then: terminal, kept until its TTL).
      expect(res?.requeueAfterMs).toBeGreaterThan(0);
    } finally {
      await r.stop();
      await deleteNamespace(k, ns);
    }
  });

  // Found by the bench (1-3 of 20 back-to-back warm runs executed twice): the controller decided to
  // start a run of this replica from its cache, read the run (still without its outcome: a warm
  // run in the reserved pod writes nothing before its code ends) while the gateway's own
  // execution of it ran and ended, then handed that read to the engine, which ran it again in a
  // second pod. The engine remembers what this process ran, whatever object it is handed.
  // Another replica deleted the run at its TTL and a script created a run of the same name since;
  // this replica's cache still holds the finished one. The new run is not the one judged.
  it('a run past its TTL in the cache is deleted as that object, never a run created since under its name', async () => {
    const ns = await createNamespace('int-ttl');
    const start = Date.now();
    const r = await runRig(clients, ns, new Date(start));
    try {
      const at = (s: number): string => new Date(start + s * 1000).toISOString();
      await buildWorld(clients, ns, {
        runs: [{ name: 'r', spec: { ...spec, ttlSecondsAfterFinished: 60 }, status: { phase: 'Succeeded', reason: 'Succeeded', completionTime: at(-120) } }],
      });
      await r.settle();
      await r.freezeRunCache();
      const api = { group: GROUP, version: VERSION, namespace: ns, plural: SANDBOXRUN_PLURAL };
      await clients.custom.deleteNamespacedCustomObject({ ...api, name: 'r' });
      const created = (await clients.custom.createNamespacedCustomObject({
        ...api,
        body: { apiVersion: `${GROUP}/${VERSION}`, kind: SANDBOXRUN_KIND, metadata: { name: 'r' }, spec },
      })) as SandboxRun;

      await r.controller.reconcile(`${ns}/r`);
      await r.settle();
      const left = (await clients.custom.getNamespacedCustomObject({ ...api, name: 'r' }).catch(() => undefined)) as SandboxRun | undefined;
      expect(left?.metadata.uid, 'the run created since under the name was deleted').toBe(created.metadata.uid);
    } finally {
      await r.stop();
      await deleteNamespace(k, ns);
    }
  });

  it('the engine does not start again a run this replica ran, when handed the object read before its outcome', async () => {
    const ns = await createNamespace('int-twice');
    // Ending early (the limits refuse it) is enough: the engine has started the run and recorded it.
    const r = await runRig(clients, ns, new Date(), { CODEMODE_MAX_TIMEOUT_SECONDS: '60' });
    try {
      await buildWorld(clients, ns, { runs: [{ name: 'r', spec: { ...spec, timeoutSeconds: 120 }, annotations: { [ANNOTATION_EXECUTOR]: IDENTITY } }] });
      await r.settle();
      const read = (await clients.custom.getNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: ns,
        plural: SANDBOXRUN_PLURAL,
        name: 'r',
      })) as SandboxRun;
      expect((await r.executor.execute(read)).reason).toBe(Reasons.InvalidSpec);
      await r.settle();
      const before = await snapshot(clients, ns);
      expect(JSON.stringify(before)).toContain(Reasons.InvalidSpec);

      const again = await r.executor.execute(read);
      await r.settle();

      // Answered from the recorded outcome; nothing written again (no status, no second Event).
      expect(again.reason).toBe(Reasons.InvalidSpec);
      expect(await snapshot(clients, ns)).toEqual(before);
    } finally {
      await r.stop();
      await deleteNamespace(k, ns);
    }
  });

  // Caught once by the helm upgrade e2e: a stopping replica's server answered a request that
  // reached it after the engine's drain had looked at what was in flight; that run replied
  // Succeeded and its final status never landed (the process had exited). drain() waits for runs
  // that start while it waits, and for their records.
  it('drain() waits for a run that starts while it waits, until its outcome is in the API', async () => {
    const ns = await createNamespace('int-drain');
    // The rig starts no NetworkPolicy informer, so no sandbox is ever allowed here: each run waits
    // out the policy gate (20 s) and ends Failed without creating a pod. That is the run in flight.
    const r = await runRig(clients, ns, new Date());
    try {
      const annotations = { [ANNOTATION_EXECUTOR]: IDENTITY };
      await buildWorld(clients, ns, {
        runs: [
          { name: 'first', spec, annotations },
          { name: 'late', spec, annotations },
        ],
      });
      await r.settle();
      const read = async (name: string): Promise<SandboxRun> =>
        (await clients.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: SANDBOXRUN_PLURAL, name })) as SandboxRun;
      const first = r.executor.execute(await read('first'));
      const drained = r.executor.drain();
      await new Promise((res) => setTimeout(res, 1000));
      const late = r.executor.execute(await read('late'));
      await drained;
      // One look at what was in flight returned when `first` ended, a second before `late` had.
      expect((await read('late')).status?.phase).toBe('Failed');
      for (const o of [await first, await late]) expect(o).toMatchObject({ phase: 'Failed', reason: Reasons.ExecFailed });
    } finally {
      await r.stop();
      await deleteNamespace(k, ns);
    }
  }, 60_000);
});
