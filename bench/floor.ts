// The floors every other figure is compared with: one exec through the API server to a pod that
// is already running, and a hardened pod from create to Running (seen by a watch) to one exec.
import { execCapture, type TestKube } from '../test/e2e/helpers/kube.js';
import { untilRelistPhase } from './relist-phase.js';
import { SANDBOX_CONTAINER, floorPod, type PodTimeline } from './sandbox-pod.js';

export const PRINT_1 = ['python3', '-c', 'print(1)'];
export const TRUE = ['true'];

export interface LatencySamples {
  samples: number[];
  errors: number;
  firstError?: string;
}

/** One exec round trip, from the call to the exit status; throws on a wrong answer. */
export async function timedExec(k: TestKube, ns: string, pod: string, command: string[]): Promise<number> {
  const t0 = performance.now();
  const r = await execCapture(k, ns, pod, command, SANDBOX_CONTAINER);
  const dt = performance.now() - t0;
  if (r.exitCode !== 0) throw new Error(`exec ${command.join(' ')} in ${ns}/${pod} failed: ${r.error ?? `exit ${String(r.exitCode)}`}`);
  if (command === PRINT_1 && r.stdout !== '1\n') throw new Error(`exec printed ${JSON.stringify(r.stdout)} instead of "1\\n"`);
  return dt;
}

/** Sequential exec round trips to one running pod, after `warmup` unrecorded ones. */
export async function rawExecLatency(k: TestKube, ns: string, pod: string, command: string[], n: number, warmup = 5): Promise<LatencySamples> {
  const out: LatencySamples = { samples: [], errors: 0 };
  for (let i = 0; i < warmup + n; i++) {
    try {
      const dt = await timedExec(k, ns, pod, command);
      if (i >= warmup) out.samples.push(dt);
    } catch (err) {
      out.errors++;
      out.firstError ??= String(err);
    }
  }
  return out;
}

export interface PodFloorSample {
  total: number;
  createCall: number;
  toScheduled: number;
  toReady: number;
  exec: number;
  delete: number;
}

export interface PodFloorResult {
  samples: PodFloorSample[];
  errors: number;
  firstError?: string;
}

/**
 * create Pod → Running+Ready seen by the watch → one exec (`print(1)`), timed to the exec's
 * result. The delete afterwards (grace 0, like the operator) is timed separately and awaited so
 * pods do not pile up; the kubelet still tears the last one down while the next one starts, as it
 * does between the operator's runs. Throws (the pod deleted) when the pod does not start or the
 * exec fails.
 */
export async function podFloorOnce(k: TestKube, timeline: PodTimeline, name: string): Promise<PodFloorSample> {
  const ns = timeline.namespace;
  try {
    const t0 = performance.now();
    await k.core.createNamespacedPod({ namespace: ns, body: floorPod(ns, name) });
    const tCreated = performance.now();
    const state = await timeline.watcher.waitReady(ns, name, 120_000);
    if (state.kind !== 'ready') throw new Error(`pod ${ns}/${name} did not become ready: ${JSON.stringify(state)}`);
    const tReady = performance.now();
    const exec = await timedExec(k, ns, name, PRINT_1);
    const total = performance.now() - t0;
    const tDel = performance.now();
    await k.core.deleteNamespacedPod({ namespace: ns, name, gracePeriodSeconds: 0 });
    const del = performance.now() - tDel;
    const times = timeline.timesOf(name);
    return { total, createCall: tCreated - t0, toScheduled: (times.scheduled ?? tReady) - t0, toReady: tReady - t0, exec, delete: del };
  } catch (err) {
    await k.core.deleteNamespacedPod({ namespace: ns, name, gracePeriodSeconds: 0 }).catch(() => undefined);
    throw err;
  }
}

/** Floor samples as they are taken, one call at a time (alone, or between the cold row's calls). */
export class PodFloorBatch {
  readonly result: PodFloorResult = { samples: [], errors: 0 };
  private calls = 0;

  constructor(
    private readonly k: TestKube,
    readonly timeline: PodTimeline,
  ) {}

  /** One floor call; its sample is kept when `record`. */
  async one(record: boolean): Promise<void> {
    try {
      const sample = await podFloorOnce(this.k, this.timeline, `bench-floor-${this.calls++}`);
      if (record) this.result.samples.push(sample);
    } catch (err) {
      this.result.errors++;
      this.result.firstError ??= String(err);
    }
  }
}

/**
 * `n` floor calls after `warmup`, each at the next phase of the kubelet's relist (relist-phase.ts):
 * the floor alone, when the cold row is not measured (with it, its calls alternate with the cold
 * row's at the same phases).
 */
export async function rawPodFloor(k: TestKube, timeline: PodTimeline, n: number, warmup = 1): Promise<PodFloorResult> {
  const batch = new PodFloorBatch(k, timeline);
  for (let i = 0; i < warmup + n; i++) {
    await untilRelistPhase(timeline.lastReadyMs(), i);
    await batch.one(i >= warmup);
  }
  return batch.result;
}

/** Starts one long-lived floor pod and waits (by watch) until exec can reach it. */
export async function startTargetPod(k: TestKube, timeline: PodTimeline, name: string, image?: string): Promise<void> {
  const ns = timeline.namespace;
  await k.core.createNamespacedPod({ namespace: ns, body: floorPod(ns, name, image) });
  const state = await timeline.watcher.waitReady(ns, name, 120_000);
  if (state.kind !== 'ready') throw new Error(`pod ${ns}/${name} did not become ready: ${JSON.stringify(state)}`);
}
