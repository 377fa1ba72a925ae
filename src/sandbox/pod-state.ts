// What a sandbox pod's status says: ready for exec, still starting, or never going to work. Pure.
import type { V1Pod } from '@kubernetes/client-node';
import { Reasons, type Reason } from '../api/v1alpha1/index.js';
import { podFailure } from './pod-failure.js';

export type PodState = { kind: 'ready' } | { kind: 'pending'; message: string } | { kind: 'failed'; reason: Reason; message: string };

const IMAGE_ERRORS = new Set(['ErrImagePull', 'ImagePullBackOff', 'ErrImageNeverPull', 'InvalidImageName']);

/** Reads a sandbox pod's status: ready for exec, still starting, or never going to work. */
export function podState(pod: V1Pod): PodState {
  if (pod.metadata?.deletionTimestamp) {
    return { kind: 'failed', reason: Reasons.PodDeleted, message: 'The sandbox pod is being deleted.' };
  }
  const phase = pod.status?.phase;
  if (phase === 'Failed' || phase === 'Succeeded') {
    const term = pod.status?.containerStatuses?.[0]?.state?.terminated;
    if (term?.reason === 'OOMKilled') {
      return { kind: 'failed', reason: Reasons.OOMKilled, message: 'The sandbox container was killed for exceeding its memory limit.' };
    }
    const failure = podFailure(pod);
    if (failure?.reason === Reasons.DiskFull) return { kind: 'failed', reason: Reasons.DiskFull, message: `The session's ${failure.detail}` };
    const why = pod.status?.reason === 'DeadlineExceeded' ? 'it reached its active deadline' : (pod.status?.message ?? term?.reason ?? 'the container stopped');
    return { kind: 'failed', reason: Reasons.PodFailed, message: `The sandbox pod stopped: ${why}.` };
  }
  for (const cs of pod.status?.containerStatuses ?? []) {
    const waiting = cs.state?.waiting;
    if (waiting?.reason && IMAGE_ERRORS.has(waiting.reason)) {
      return {
        kind: 'failed',
        reason: Reasons.ImageNotFound,
        message: `The sandbox image ${cs.image} could not be pulled (${waiting.reason}). Ask the administrator to check the image name (CODEMODE_SANDBOX_IMAGE) and that nodes can pull it.`,
      };
    }
    if (waiting?.reason === 'CreateContainerConfigError' || waiting?.reason === 'CreateContainerError' || waiting?.reason === 'RunContainerError') {
      return {
        kind: 'failed',
        reason: Reasons.PodFailed,
        message: `The sandbox container could not start (${waiting.reason}: ${waiting.message ?? 'no details'}).`,
      };
    }
  }
  const ready = pod.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
  if (phase === 'Running' && ready) return { kind: 'ready' };
  const sched = pod.status?.conditions?.find((c) => c.type === 'PodScheduled');
  if (sched?.status === 'False' && sched.reason === 'Unschedulable') {
    return { kind: 'pending', message: `Unschedulable: ${sched.message ?? 'no node fits the pod'}` };
  }
  return { kind: 'pending', message: `Pod is ${phase ?? 'being created'}.` };
}
