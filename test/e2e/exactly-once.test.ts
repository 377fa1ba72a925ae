// Exactly-once from the API (issue 13): whether a run may have started is read from the API — a
// pod that carries the run — never from a process's memory. A run whose executor vanished is
// recorded as Failed with a reason and never started again; a run nobody started is executed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ANNOTATION_EXECUTOR, GROUP, LABEL_MANAGED_BY, MANAGED_BY_VALUE, SANDBOXRUN_PLURAL, VERSION, type SandboxRun } from '../../src/api/v1alpha1/index.js';
import { VANISHED_MESSAGE } from '../../src/controller/run-decision.js';
import { podNameForRun } from '../../src/sandbox/names.js';
import { createNamespace, deleteNamespace, simplePod, testKube, until } from './helpers/kube.js';
import { startOperator, type RunningOperator } from './helpers/operator.js';

const k = testKube();
let ns = '';
let op: RunningOperator;
const api = { group: GROUP, version: VERSION, plural: SANDBOXRUN_PLURAL };

beforeAll(async () => {
  ns = await createNamespace(k, 'once');
  // A short start-up allowance keeps a vanished executor's budget (start-up + timeout + 60 s) short.
  op = await startOperator(ns, { CODEMODE_POD_STARTUP_TIMEOUT_SECONDS: '20' });
});
afterAll(async () => {
  await op?.stop();
  await deleteNamespace(k, ns);
});

async function create(name: string, annotations: Record<string, string> = {}): Promise<SandboxRun> {
  const body = {
    apiVersion: `${GROUP}/${VERSION}`,
    kind: 'SandboxRun',
    metadata: { name, annotations },
    spec: { language: 'python', code: 'print("ran")', timeoutSeconds: 1 },
  };
  return (await k.custom.createNamespacedCustomObject({ ...api, namespace: ns, body })) as SandboxRun;
}

const get = async (name: string): Promise<SandboxRun> => (await k.custom.getNamespacedCustomObject({ ...api, namespace: ns, name })) as SandboxRun;

describe('exactly-once', () => {
  it('records a run whose executor vanished after its pod was created as Failed, and never runs it again', async () => {
    const run = await create('vanished', { [ANNOTATION_EXECUTOR]: 'a-replica-that-is-gone' });
    // The marker: a pod that carries the run, as the vanished executor left it.
    const marker = simplePod('vanished-marker', ['sleep', 'infinity'], { [LABEL_MANAGED_BY]: MANAGED_BY_VALUE });
    marker.metadata = {
      ...marker.metadata,
      ownerReferences: [{ apiVersion: `${GROUP}/${VERSION}`, kind: 'SandboxRun', name: 'vanished', uid: run.metadata.uid ?? '', controller: true }],
    };
    await k.core.createNamespacedPod({ namespace: ns, body: marker });
    await until(async () => (await get('vanished')).status?.phase === 'Failed', 150_000, 'the vanished run Failed');
    const done = await get('vanished');
    expect(done.status).toMatchObject({ reason: 'ExecFailed', message: VANISHED_MESSAGE });
    expect(done.status?.stdout ?? '').toBe('');
    // No pod of its own was ever created for it: the code was not started again.
    await expect(k.core.readNamespacedPod({ namespace: ns, name: podNameForRun('vanished') })).rejects.toMatchObject({ code: 404 });
  });

  it('executes an unclaimed run once, and keeps it finished after its pod is gone', async () => {
    await create('fresh');
    await until(async () => ['Succeeded', 'Failed', 'TimedOut'].includes((await get('fresh')).status?.phase ?? ''), 90_000, 'the fresh run finished');
    const first = await get('fresh');
    expect(first.status, JSON.stringify(first.status)).toMatchObject({ phase: 'Succeeded', stdout: 'ran\n' });
    // The outcome was recorded before the pod was deleted; afterwards nothing starts it again.
    await until(
      async () =>
        (await k.core.listNamespacedPod({ namespace: ns, labelSelector: `${LABEL_MANAGED_BY}=${MANAGED_BY_VALUE}` })).items.every(
          (p) => p.metadata?.name === 'vanished-marker',
        ),
      30_000,
      'the run pod deleted',
    );
    await new Promise((r) => setTimeout(r, 3000));
    const later = await get('fresh');
    expect(later.status?.completionTime).toBe(first.status?.completionTime);
    expect(later.status?.startTime).toBe(first.status?.startTime);
  });
});
