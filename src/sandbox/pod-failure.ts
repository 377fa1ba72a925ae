// Why a sandbox pod itself stopped (an OOM kill, an eviction), read from its status when the
// code's own report never came. Pure; the kubelet's words are bounded before anyone shows them.
import type { V1Pod } from '@kubernetes/client-node';
import { Reasons, sentence } from '../api/v1alpha1/index.js';
import { WORKSPACE_MIN_ENTRY_BYTES, WORKSPACE_VOLUME } from './pod.js';

/** Why the pod itself stopped, read from its status when the code's own report never came. */
export interface PodFailure {
  reason: typeof Reasons.OOMKilled | typeof Reasons.Evicted | typeof Reasons.DiskFull;
  /** The kubelet's own words (e.g. which volume exceeded which limit), already bounded. */
  detail: string;
  /**
   * An OOM kill: the killed container's memory limit and the directories whose files count against
   * it (its volumes in memory: /tmp, and /workspace when a profile puts it there), from its spec.
   */
  memory?: MemoryCharge;
}

export interface MemoryCharge {
  limit?: string;
  tmpfs: readonly string[];
}

/** "files in /tmp and /workspace count as memory", or '' when no directory is in memory. */
export function memoryFilesText(tmpfs: readonly string[]): string {
  return tmpfs.length === 0 ? '' : `files in ${[...tmpfs].sort().join(' and ')} count as memory`;
}

/** "used more memory than its limit (512Mi) and was killed; files in /tmp count as memory". */
export function outOfMemory(memory: MemoryCharge | undefined): string {
  const files = memoryFilesText(memory?.tmpfs ?? []);
  return `used more memory than its limit${memory?.limit !== undefined ? ` (${memory.limit})` : ''} and was killed${files ? `; ${files}` : ''}`;
}

/** The container's memory limit and its mount paths whose volume is an emptyDir in memory. */
function memoryCharge(pod: V1Pod, container: string): MemoryCharge {
  const c = pod.spec?.containers.find((x) => x.name === container);
  const inMemory = new Set((pod.spec?.volumes ?? []).filter((v) => v.emptyDir?.medium === 'Memory').map((v) => v.name));
  const tmpfs = (c?.volumeMounts ?? [])
    .filter((m) => inMemory.has(m.name))
    .map((m) => m.mountPath)
    .sort();
  const limit = c?.resources?.limits?.memory;
  return { ...(limit !== undefined && { limit }), tmpfs };
}

/** Maximum length of the kubelet's text kept in a message (it comes from the pod's status). */
const POD_DETAIL_MAX_CHARS = 300;

/**
 * Why a pod's container stopped, from its status, when it was an OOM kill or an eviction; else
 * undefined. The sandbox container's current or last terminated state says OOMKilled; an evicted
 * pod has status.reason Evicted and the kubelet's message.
 */
export function podFailure(pod: V1Pod | undefined): PodFailure | undefined {
  if (!pod) return undefined;
  const detail = (text: string | undefined, fallback: string): string => {
    const t = (text ?? '').replace(/\s+/g, ' ').trim();
    if (t === '') return fallback;
    return t.length > POD_DETAIL_MAX_CHARS ? `${t.slice(0, POD_DETAIL_MAX_CHARS)}…` : sentence(t);
  };
  if (pod.status?.reason === 'Evicted') return { reason: Reasons.Evicted, detail: detail(pod.status.message, 'no details.') };
  for (const cs of pod.status?.containerStatuses ?? []) {
    const term = cs.state?.terminated ?? cs.lastState?.terminated;
    if (term?.reason === 'OOMKilled') {
      const memory = memoryCharge(pod, cs.name);
      const files = memoryFilesText(memory.tmpfs);
      return { reason: Reasons.OOMKilled, detail: `the container was OOM-killed${files ? `; ${files}` : ''}.`, memory };
    }
    if (term?.exitCode === KERNEL_WORKSPACE_OVER_EXIT_CODE) return { reason: Reasons.DiskFull, detail: `${workspaceOverText(workspaceSize(pod))}.` };
  }
  return undefined;
}

/**
 * The exit code of a session kernel that ended its session because /workspace on disk went past
 * its size limit (bounds.py and bounds.js, WorkspaceGuard). Code in the session can make its
 * kernel exit with any code: it can only say this of its own session.
 */
export const KERNEL_WORKSPACE_OVER_EXIT_CODE = 4;

/** The size limit of the pod's /workspace volume, from its spec. */
function workspaceSize(pod: V1Pod): string | undefined {
  return pod.spec?.volumes?.find((v) => v.name === WORKSPACE_VOLUME)?.emptyDir?.sizeLimit;
}

/**
 * "/workspace went over its size limit (512Mi: …)": what a session's user reads when its kernel
 * ended it for that (KERNEL_WORKSPACE_OVER_EXIT_CODE, or a Node kernel's `lost` result saying so).
 */
export function workspaceOverText(size: string | undefined): string {
  const each = `each file or directory counting at least ${String(WORKSPACE_MIN_ENTRY_BYTES / 1024)} KiB, open deleted files included, a directory it could not read as full`;
  return `/workspace on the node's disk went over its size limit (${size === undefined ? each : `${size}, ${each}`}), so the interpreter was stopped and the session's files deleted`;
}

/**
 * The exit code of a sandbox kernel that refused to start because its pod could still reach the
 * network (runtime/PROTOCOL.md, "Network check"; server.py, kernel.js: before it listens). The
 * python kernel also exits with it when it gives up a call it could not interrupt, which needs
 * code sent to it first.
 */
export const KERNEL_NOT_ISOLATED_EXIT_CODE = 3;

/**
 * Whether the pod's container ended with KERNEL_NOT_ISOLATED_EXIT_CODE. Code can make the kernel
 * exit with any code, and so can a call it gave up: the caller trusts it only for a single-use pod
 * that no code was ever sent to.
 */
export function kernelRefusedNetwork(pod: V1Pod | undefined): boolean {
  return (pod?.status?.containerStatuses ?? []).some((cs) => (cs.state?.terminated ?? cs.lastState?.terminated)?.exitCode === KERNEL_NOT_ISOLATED_EXIT_CODE);
}

/**
 * The pod is known to have stopped running code: gone, being deleted, evicted, finished, or its
 * container terminated. Then no report from the code can still come, and podFailure() says why
 * if its status knows. One rule for transient runs (read from the pod cache) and session kernels
 * (read from the API).
 */
export function podStopped(pod: V1Pod | undefined): boolean {
  return (
    !pod ||
    pod.metadata?.deletionTimestamp !== undefined ||
    pod.status?.reason === 'Evicted' ||
    pod.status?.phase === 'Failed' ||
    pod.status?.phase === 'Succeeded' ||
    (pod.status?.containerStatuses ?? []).some((cs) => cs.state?.terminated !== undefined)
  );
}
