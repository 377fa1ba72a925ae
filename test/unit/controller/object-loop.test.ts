import type { KubernetesObject, V1Pod } from '@kubernetes/client-node';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { ControllerMetrics } from '../../../src/controller/metrics.js';
import { ObjectLoop, objectKey } from '../../../src/controller/object-loop.js';

const obj = (namespace: string, name: string, annotations?: Record<string, string>): KubernetesObject => ({
  metadata: { namespace, name, ...(annotations && { annotations }) },
});

/** A pod in `ns` whose owner reference names `kind`/`name` (controlling or not). */
const pod = (ns: string, kind: string, name: string, controller = true): V1Pod => ({
  metadata: { namespace: ns, name: `${name}-pod`, ownerReferences: [{ apiVersion: 'codemode.dev/v1alpha1', kind, name, uid: 'u', controller }] },
});

/** Informers that are lists the test changes, with their change listeners. */
function world(objects: KubernetesObject[]) {
  const objectListeners: Array<(o: KubernetesObject) => void> = [];
  const podListeners: Array<(p: V1Pod) => void> = [];
  return {
    objects: { list: () => objects, onChange: (l: (o: KubernetesObject) => void) => void objectListeners.push(l) },
    pods: { onChange: (l: (p: V1Pod) => void) => void podListeners.push(l) },
    changed: (o: KubernetesObject) => objectListeners.forEach((l) => l(o)),
    podChanged: (p: V1Pod) => podListeners.forEach((l) => l(p)),
  };
}

function loop(w: ReturnType<typeof world>, reconcile: (key: string) => Promise<{ requeueAfterMs?: number } | void>, metrics?: ControllerMetrics) {
  return new ObjectLoop(
    {
      controller: 'sandboxrun',
      kind: 'SandboxRun',
      workers: 2,
      objects: w.objects,
      pods: w.pods,
      resyncSeconds: 3600,
      log: pino({ level: 'silent' }),
      ...(metrics && { metrics }),
    },
    reconcile,
  );
}

describe('objectKey', () => {
  it.each([
    [obj('ns', 'a'), 'ns/a'],
    [{ metadata: { name: 'a' } }, '/a'],
    [{}, '/'],
  ])('%j → %s', (o, key) => {
    expect(objectKey(o)).toBe(key);
  });
});

describe('ObjectLoop', () => {
  it('reconciles nothing before start(), then every listed object once', async () => {
    const w = world([obj('ns', 'a'), obj('ns', 'b')]);
    const seen: string[] = [];
    const l = loop(w, async (k) => void seen.push(k));
    w.changed(obj('ns', 'a'));
    await new Promise((r) => setTimeout(r, 20));
    expect(seen).toEqual([]);
    l.start();
    await l.queue.idle();
    l.stop();
    expect(seen.sort()).toEqual(['ns/a', 'ns/b']);
  });

  it.each([
    ['a pod its kind controls queues the owner', pod('ns', 'SandboxRun', 'r1'), ['ns/r1']],
    ['a pod another kind controls queues nothing', pod('ns', 'SandboxSession', 's1'), []],
    ['a pod its kind owns without controlling it queues nothing', pod('ns', 'SandboxRun', 'r1', false), []],
    ['a pod without owners queues nothing', { metadata: { namespace: 'ns', name: 'p' } } as V1Pod, []],
  ])('%s', async (_, p, expected) => {
    const w = world([]);
    const seen: string[] = [];
    const l = loop(w, async (k) => void seen.push(k));
    l.start();
    w.podChanged(p);
    await l.queue.idle();
    l.stop();
    expect(seen).toEqual(expected);
  });

  it('addAll(which) queues only the objects it picks', async () => {
    const w = world([obj('ns', 'a', { mine: 'x' }), obj('ns', 'b'), obj('ns', 'c', { mine: 'x' })]);
    const seen: string[] = [];
    const l = loop(w, async (k) => void seen.push(k));
    l.addAll((o) => o.metadata?.annotations?.mine === 'x');
    l.queue.start();
    await l.queue.idle();
    l.stop();
    expect(seen).toEqual(['ns/a', 'ns/c']);
  });

  it.each([
    ['a reconcile that returns', async () => {}, 'success'],
    ['a reconcile that asks to be called again', async () => ({ requeueAfterMs: 60_000 }), 'requeue_after'],
    [
      'a reconcile that throws',
      async () => {
        throw new Error('boom');
      },
      'error',
    ],
  ] as const)('reports %s to the metrics as %s', async (_, reconcile, result) => {
    const reported: string[] = [];
    const metrics = {
      queue: () => ({ adds() {}, retries() {}, depth() {}, queueDuration() {}, workDuration() {} }),
      reconcile: (controller: string, r: string, seconds: number) => {
        expect(seconds).toBeGreaterThanOrEqual(0);
        reported.push(`${controller} ${r}`);
      },
    } as unknown as ControllerMetrics;
    const w = world([obj('ns', 'a')]);
    const l = loop(w, reconcile, metrics);
    l.start();
    await l.queue.idle();
    l.stop();
    expect(reported[0]).toBe(`sandboxrun ${result}`);
  });
});
