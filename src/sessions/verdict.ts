// Why a session's interpreter vanished, when its pod's status knows: an OOM kill of the container
// or an eviction (e.g. /workspace past its limit). Read from the API with a short bounded poll,
// since the kubelet reports the stopped container a second or two after the stream ends.
import { Reasons } from '../api/v1alpha1/index.js';
import { outOfMemory, podFailure, podStopped, type PodFailure } from '../sandbox/pod-failure.js';
import type { SessionCallResult } from './service.js';
import { isNotFound, type KubeClients } from '../kube/clients.js';

const VERDICT_WAIT_MS = 8000;
const VERDICT_POLL_MS = 500;

export async function podVerdict(clients: KubeClients, namespace: string, name: string, waitMs = VERDICT_WAIT_MS): Promise<PodFailure | undefined> {
  return (await readPodState(clients, namespace, name, waitMs)).failure;
}

/**
 * The pod's failure, if its status names one, and whether it is known to have stopped (gone, being
 * deleted, or its container terminated): then its kernel is gone too. A pod that could not be read
 * (the API server did not answer) is not known to have stopped.
 */
export async function readPodState(
  clients: KubeClients,
  namespace: string,
  name: string,
  waitMs = VERDICT_WAIT_MS,
): Promise<{ failure?: PodFailure; stopped: boolean }> {
  const end = Date.now() + waitMs;
  for (;;) {
    let unreadable = false;
    const pod = await clients.core.readNamespacedPod({ namespace, name }).catch((err: unknown) => {
      unreadable = !isNotFound(err);
      return undefined;
    });
    const failure = podFailure(pod);
    if (failure) return { failure, stopped: true };
    const stopped = !unreadable && podStopped(pod);
    if (stopped || Date.now() >= end) return { stopped };
    await new Promise((r) => setTimeout(r, VERDICT_POLL_MS));
  }
}

/** The output part of a result the gateway makes for a call the kernel never answered. */
export const NO_OUTPUT = { stdout: '', stderr: '', stdoutBytes: 0, stderrBytes: 0, truncated: false, durationMs: 0 } as const;

/** A call whose interpreter was OOM-killed, evicted or ended for its /workspace: a `lost` result that says so. */
export function lostTo(verdict: PodFailure, session: string, capChars = 50_000): SessionCallResult {
  const evalue =
    verdict.reason === Reasons.OOMKilled
      ? `the interpreter ${outOfMemory(verdict.memory)}`
      : verdict.reason === Reasons.DiskFull
        ? verdict.detail
        : `the pod was evicted: ${verdict.detail}`;
  return {
    status: 'lost',
    ...NO_OUTPUT,
    error: { ename: verdict.reason, evalue, traceback: '' },
    podFailure: verdict.reason,
    session,
    capChars,
    ...(verdict.memory && { memory: verdict.memory }),
  };
}
