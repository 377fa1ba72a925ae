// Whether a stdio UpstreamServer's pod serves, as a pure function of its Deployment and pods: the
// gateway connects only once the Deployment is available, and until then the status says why
// (an image that cannot be pulled, a crash loop, objects the API server refused).
import type { V1ContainerStatus, V1Deployment, V1Pod } from '@kubernetes/client-node';
import { UpstreamReasons } from '../api/v1alpha1/index.js';
import { ANNOTATION_STDIO_HASH } from './stdio-objects.js';

export type StdioHealth =
  { available: true } | { available: false; reason: typeof UpstreamReasons.ServerStarting | typeof UpstreamReasons.ServerFailing; message: string };

/** Waiting reasons that will not clear by themselves (the kubelet retries, the status should say so). */
const FAILING_WAITING = new Set([
  'ErrImagePull',
  'ImagePullBackOff',
  'InvalidImageName',
  'ErrImageNeverPull',
  'CrashLoopBackOff',
  'CreateContainerConfigError',
  'CreateContainerError',
  'RunContainerError',
]);
const MAX_MESSAGE = 400;

function cut(text: string): string {
  return text.length <= MAX_MESSAGE ? text : `${text.slice(0, MAX_MESSAGE - 1)}…`;
}

function containerProblem(c: V1ContainerStatus): string | undefined {
  const w = c.state?.waiting;
  if (w?.reason && FAILING_WAITING.has(w.reason)) {
    const last = c.lastState?.terminated;
    const exit = last ? ` (last exit code ${last.exitCode}${last.reason ? `, ${last.reason}` : ''})` : '';
    return `container ${c.name}: ${w.reason}${exit}${w.message ? `: ${w.message}` : ''}`;
  }
  return undefined;
}

/**
 * `applyError`: the leader's last failure to apply the objects (e.g. egress rules the API server
 * refused); `desiredHash`: the hash annotation of the Deployment the current spec asks for.
 */
export function stdioHealth(deployment: V1Deployment | undefined, pods: readonly V1Pod[], applyError?: string, desiredHash?: string): StdioHealth {
  if (applyError !== undefined)
    return { available: false, reason: UpstreamReasons.ServerFailing, message: cut(`The operator could not apply the server's objects: ${applyError}`) };
  if (!deployment) return { available: false, reason: UpstreamReasons.ServerStarting, message: "Creating the server's Deployment, Service and NetworkPolicy." };
  // A Deployment from before the latest spec edit still serves the old server: not this spec's.
  if (desiredHash !== undefined && deployment.metadata?.annotations?.[ANNOTATION_STDIO_HASH] !== desiredHash)
    return { available: false, reason: UpstreamReasons.ServerStarting, message: "Applying the changed spec to the server's Deployment." };
  const st = deployment.status;
  const current = (st?.observedGeneration ?? 0) >= (deployment.metadata?.generation ?? 0);
  // Every pod runs this spec (a rollout leaves none of the old) and one is available.
  const updated = st?.updatedReplicas ?? 0;
  if (current && updated >= 1 && updated === (st?.replicas ?? 0) && (st?.availableReplicas ?? 0) >= 1) return { available: true };
  for (const pod of pods) {
    for (const c of [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])]) {
      const problem = containerProblem(c);
      if (problem) return { available: false, reason: UpstreamReasons.ServerFailing, message: cut(`Pod ${pod.metadata?.name ?? '?'}: ${problem}`) };
    }
  }
  const failure = st?.conditions?.find((c) => c.type === 'ReplicaFailure' && c.status === 'True');
  if (failure)
    return { available: false, reason: UpstreamReasons.ServerFailing, message: cut(`Deployment: ${failure.reason ?? ''}: ${failure.message ?? ''}`) };
  return { available: false, reason: UpstreamReasons.ServerStarting, message: "Waiting for the server's pod to become ready (the bridge's /healthz)." };
}
