// RunSlots on the real API server: when a finished run's slot is free. A run that ended in a
// reserved pool pod is never labelled with its run (src/runs/warm-claims.ts): its slot must still
// wait for that pod, named by the run's status, to stop holding capacity, and be freed by the
// pod's own event rather than the fallback timer.
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunSlots } from '../../src/limits/run-slots.js';
import { deleteNamespace, until } from '../e2e/helpers/kube.js';
import { podInformer, runInformer } from './helpers/rig.js';
import { clients, createNamespace, k } from './helpers/table.js';
import { buildWorld } from './helpers/world.js';

const POD = 'codemode-pool-used';
/** Far beyond the test's timeout: a slot freed in this test was freed by an informer event. */
const NEVER_MS = 3_600_000;

describe('RunSlots: a finished run frees its slot once its pod stops holding capacity', () => {
  let ns = '';
  beforeAll(async () => {
    ns = await createNamespace('run-slots');
  });
  afterAll(async () => {
    if (ns) await deleteNamespace(k, ns);
  });

  it('waits for the unlabelled pool pod its status names, and is freed by its deletion', async () => {
    await buildWorld(clients, ns, {
      runs: [{ name: 'r1', spec: { language: 'python', code: 'print(1)', timeoutSeconds: 30 }, status: { phase: 'Succeeded', podName: POD } }],
      pods: [{ name: POD, labels: { 'codemode.dev/pool': 'warm' }, annotations: { 'codemode.dev/reserved-by': '0123456789abcdef' } }],
    });
    const runs = runInformer(clients, ns);
    const pods = podInformer(clients, ns);
    await runs.start();
    await pods.start();
    const slots = new RunSlots(
      runs,
      pods,
      'integration-replica',
      { namespace: ns, caps: { replicaRuns: 2, namespaceRuns: 0, queueLength: 0, queueTimeoutSeconds: 1 } },
      NEVER_MS,
    );
    try {
      await until(
        () => (runs.get('r1', ns) as { status?: { podName?: string } } | undefined)?.status?.podName === POD && pods.get(POD, ns) !== undefined,
        30_000,
        'the caches',
      );
      let released = false;
      const freed = new Promise<void>((resolve) => {
        slots.releaseAfter(
          {
            release: () => {
              released = true;
              resolve();
            },
          },
          Promise.resolve(),
          ns,
          'r1',
        );
      });
      // An event for the pod (an annotation) makes the slot look again: the pod still holds capacity.
      await clients.core.patchNamespacedPod(
        { namespace: ns, name: POD, body: { metadata: { annotations: { touched: 'yes' } } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      await until(() => pods.get(POD, ns)?.metadata?.annotations?.touched === 'yes', 30_000, 'the pod event');
      await new Promise((r) => setImmediate(r));
      expect(released).toBe(false);
      await clients.core.deleteNamespacedPod({ namespace: ns, name: POD, gracePeriodSeconds: 0 });
      await freed;
      expect(released).toBe(true);
    } finally {
      slots.admission.close();
      await runs.stop();
      await pods.stop();
    }
  }, 60_000);
});
