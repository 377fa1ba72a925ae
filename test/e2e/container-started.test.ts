// The kubelet's Started Event as the signal that a new pod's container runs (src/sandbox/
// container-started.ts), against the real API server and kubelet: it comes for a pod that starts,
// counts when it exists already, and a pod that never starts gives way to `until`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { whenContainerStarted } from '../../src/sandbox/container-started.js';
import { createNamespace, deleteNamespace, runPod, simplePod, testKube } from './helpers/kube.js';

const k = testKube();
let ns = '';

beforeAll(async () => {
  ns = await createNamespace(k, 'container-started');
});
afterAll(async () => {
  if (ns) await deleteNamespace(k, ns);
});

const never = new Promise<never>(() => undefined);
const after = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('whenContainerStarted', { timeout: 120_000 }, () => {
  it('resolves true once the container of a new pod started, and again when the Event exists already', async () => {
    const pod = simplePod('starts', ['sleep', '3600']);
    await k.core.createNamespacedPod({ namespace: ns, body: pod });
    // Watched from the create on, with nothing else to end it: only the Event can.
    expect(await whenContainerStarted(k.kc, ns, 'starts', never)).toBe(true);
    await runPod(k, ns, simplePod('starts-too', ['sleep', '3600']));
    expect(await whenContainerStarted(k.kc, ns, 'starts-too', never)).toBe(true);
  });

  it('resolves false when `until` settles first: a pod whose container never starts', async () => {
    const pod = simplePod('never-starts', ['sleep', '3600']);
    const main = pod.spec?.containers[0];
    if (main) main.image = 'codemode.local/not-there:v0'; // imagePullPolicy Never: ErrImageNeverPull
    await k.core.createNamespacedPod({ namespace: ns, body: pod });
    expect(await whenContainerStarted(k.kc, ns, 'never-starts', after(5_000))).toBe(false);
    // Nor does another pod's Event count (the watch asks for this pod's only).
    await runPod(k, ns, simplePod('neighbour', ['sleep', '3600']));
    expect(await whenContainerStarted(k.kc, ns, 'never-starts', after(3_000))).toBe(false);
  });
});
