// Warm transient execute_code (pool on) and session execute_code: the two paths that skip pod
// start-up. Warm calls are measured with the pool full and the operator's kernel stream to every
// ready pool pod open (the figure is "a warm pod was there, connected"); a call that still went
// cold is counted, not mixed into the warm samples. Twice: right after the pool refilled (the
// previous call's after-work — its pod's deletion, the refill pod's start — still on the node's
// two cores) and at rest (REST_MS later, as for a caller whose calls are seconds apart).
import { ApiextensionsV1Api } from '@kubernetes/client-node';
import { GROUP, SANDBOXSESSION_PLURAL } from '../src/api/v1alpha1/index.js';
import { isWarm } from '../src/controller/pool-plan.js';
import { statusOf } from '../src/kube/clients.js';
import { podNameForRun } from '../src/sandbox/names.js';
import { LABEL_POOL } from '../src/sandbox/pod.js';
import { findRuntimeDir } from '../src/sessions/runtime-files.js';
import type { TestKube } from '../test/e2e/helpers/kube.js';
import { connect } from '../test/e2e/helpers/operator.js';
import { sleep } from './context.js';
import { executeCodeLatency, type LatencyOptions, type McpLatency } from './mcp.js';
import type { CallTimer } from './profile.js';
import type { PodTimeline } from './sandbox-pod.js';

/** The operator's default pool size. */
export const POOL_SIZE = 2;
const FILL_TIMEOUT_MS = 180_000;
/** The at-rest row's pause after the pool refilled: the previous call's pod is gone by then. */
export const REST_MS = 2500;
/** The operator opens a kernel stream (relay exec + ping) to a pool pod once it sees it Ready. */
const STREAM_TIMEOUT_MS = 15_000;

export interface WarmLatency extends McpLatency {
  /** Calls that found no ready pool pod and created one (excluded from `samples`). */
  coldFallbacks: number;
  /** Recorded calls made although a ready pool pod's kernel stream had not answered within STREAM_TIMEOUT_MS. */
  streamWaitTimeouts: number;
}

/**
 * `timer`: the operator in this process, whose kernel streams and pod creations the bench sees.
 * Without it (a gateway in a process of its own) the stream to a new pool pod is taken to be open
 * `restMs` after the pool is full (it opens on Ready, in well under a second), and a call that went
 * cold is one whose run has a pod of its own in the namespace's watch.
 */
export async function warmLatency(url: string, pods: PodTimeline, n: number, opts: LatencyOptions = {}, restMs = 0, timer?: CallTimer): Promise<WarmLatency> {
  let streamWaitTimeouts = 0;
  const full = async (): Promise<void> => {
    // The pool's own pods: a reservation (this operator's, for its next run) is an annotation on a
    // pod still labelled warm, and is not one of them.
    if (!(await pods.untilReady(LABEL_POOL, 'warm', POOL_SIZE, FILL_TIMEOUT_MS, isWarm))) {
      throw new Error(`the warm pool did not reach ${POOL_SIZE} ready pods within ${FILL_TIMEOUT_MS / 1000} s`);
    }
    // Ready by this bench's watch is not enough: the operator's stream to the newest pod (the
    // refill after the previous claim) may still be opening, and a claim of that pod would wait.
    // The reserved pod's stream too: the next run uses it.
    // After a few timeouts the streams are taken to be broken: the calls go on (and show it).
    if (timer && streamWaitTimeouts < 3) {
      const deadline = performance.now() + STREAM_TIMEOUT_MS;
      while (!pods.readyNamesWith(LABEL_POOL, 'warm').every((p) => timer.streams.get(p)?.ready !== undefined)) {
        if (performance.now() > deadline) {
          streamWaitTimeouts++;
          return;
        }
        await sleep(20);
      }
    }
    if (restMs > 0) await sleep(restMs);
  };
  const afterWarmup = async (): Promise<void> => {
    streamWaitTimeouts = 0;
    await opts.afterWarmup?.();
  };
  const lat = await executeCodeLatency(url, n, { ...opts, afterWarmup, beforeEach: full });
  // A call that went cold created a pod of its own, named after its run. (Not "a call without a
  // pool pod's claim patch": a short run in the reserved pod patches no pod.)
  const created = new Set(timer?.calls.filter((c) => c.key === 'create pods' && c.ok).map((c) => c.name));
  const cold = (run: string): boolean => (timer ? created.has(podNameForRun(run)) : pods.timesOf(podNameForRun(run)).seen !== undefined);
  const warm = lat.calls.map((c) => !cold(c.run ?? ''));
  return {
    ...lat,
    samples: lat.samples.filter((_, i) => warm[i]),
    calls: lat.calls.filter((_, i) => warm[i]),
    coldFallbacks: warm.filter((w) => !w).length,
    streamWaitTimeouts,
  };
}

/**
 * Why neither the warm pool nor sessions can work here, or undefined. Both start pods running the
 * session kernel from runtime/; without it the operator sets the pool size to 0.
 */
export function kernelsUnavailable(): string | undefined {
  return findRuntimeDir() ? undefined : 'n/a (runtime/, the session kernels, is not in this checkout: no warm pool, no sessions)';
}

/** Why sessions cannot be measured on this cluster, or undefined when they can. */
export async function sessionsUnavailable(k: TestKube): Promise<string | undefined> {
  const kernels = kernelsUnavailable();
  if (kernels) return kernels;
  try {
    await k.kc.makeApiClient(ApiextensionsV1Api).readCustomResourceDefinition({ name: `${SANDBOXSESSION_PLURAL}.${GROUP}` });
    return undefined;
  } catch (err) {
    if (statusOf(err) === 404) return 'n/a (SandboxSession CRD not installed on the cluster: kubectl apply -f crds/)';
    throw err;
  }
}

export interface SessionLatency extends McpLatency {
  createMs: number;
}

/**
 * Session calls made before the recorded ones. A session call is ~3 ms, most of it CPU in the MCP
 * SDKs (client and gateway), and a fresh gateway and client run V8's unoptimised code at first:
 * the first 100 calls' median was 3.2-3.8 ms against 2.6-3.0 ms for the 100 after 300 calls
 * (three runs, 2026-11-25), and a throwaway probe's medians per 100 calls fell from 4.4-6.0 ms to
 * ~3 ms over ~1,000 calls on a noisy node. The row is what a gateway in service answers; the first
 * 100 of these calls are reported beside it (firstCallsMs). Before 2026-11-25 the row followed 3.
 */
export const SESSION_WARMUP_CALLS = 300;
/** How many of the warm-up calls make the "first calls" figure. */
export const FIRST_CALLS = 100;

/** create_session once, then sequential execute_code calls in it, then close_session. */
export async function sessionLatency(url: string, n: number): Promise<SessionLatency> {
  const client = await connect(url, 'current');
  try {
    const t0 = performance.now();
    const created = await client.callTool('create_session', { language: 'python' });
    const createMs = performance.now() - t0;
    const session = created.structuredContent?.session;
    if (created.isError || typeof session !== 'string') throw new Error(`create_session failed: ${JSON.stringify(created.content).slice(0, 300)}`);
    try {
      return { ...(await executeCodeLatency(url, n, { warmup: SESSION_WARMUP_CALLS, args: { session } })), createMs };
    } finally {
      await client.callTool('close_session', { session });
    }
  } finally {
    await client.close();
  }
}
