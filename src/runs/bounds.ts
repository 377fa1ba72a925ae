// What a user reads when a run met one of the sandbox's bounds (process cap, memory, disk), and
// why a pod stopped when the code's own report never came. Pure, like status.ts, which uses them.
import { Reasons } from '../api/v1alpha1/index.js';
import { parseQuantity } from '../config/quantity.js';
import { WORKSPACE_MIN_ENTRY_BYTES } from '../sandbox/pod.js';
import type { Classification, Limits } from './status.js';

/** A sandbox volume with a hard size: where a run can meet DiskFull. */
export type FullVolume = 'workspace' | 'tmp';

/** Said of a program that ended with processes still running (e.g. a fork bomb's, before any met the cap). */
export function leftoverNote(leftovers: number | undefined): string {
  if (!leftovers) return '';
  const n = leftovers === 1 ? 'one process' : `${leftovers} processes`;
  return ` It left ${n} running, killed when it exited: a run keeps nothing running after its program ends (use a session for background processes).`;
}

/** What a user reads when the program met the process cap. */
export function processLimit(limits: Pick<Limits, 'maxProcesses'>, stoppedNote = ''): Classification {
  const cap = limits.maxProcesses === undefined ? 'a limited number of processes and threads' : `${limits.maxProcesses} processes and threads`;
  const stopped = stoppedNote === '' ? '' : ` ${stoppedNote}`;
  return {
    phase: 'Failed',
    reason: Reasons.ProcessLimit,
    message: `The program tried to start more processes than the sandbox allows (it allows ${cap}, including the sandbox's own), so a fork failed.${stopped} Start fewer processes or threads: use a bounded pool (e.g. multiprocessing.Pool(4), xargs -P 4) and wait for children to finish.`,
  };
}

const VOLUME_PATH: Record<FullVolume, string> = { workspace: '/workspace', tmp: '/tmp' };

/**
 * What a /workspace on disk of `size` holds at most in files and directories, said to the user
 * ('' in memory or without a size): each counts at least WORKSPACE_MIN_ENTRY_BYTES there.
 */
function entriesNote(size: string | undefined, medium: Limits['workspaceMedium']): string {
  if (size === undefined || medium === 'Memory') return '';
  let entries: number;
  try {
    entries = Math.floor(parseQuantity(size) / WORKSPACE_MIN_ENTRY_BYTES);
  } catch {
    return '';
  }
  return ` Each file or directory in it counts at least ${String(WORKSPACE_MIN_ENTRY_BYTES / 1024)} KiB, so it holds at most ${String(entries)} of them; files deleted while a process still has them open count until closed, and a directory without read and search permission for its owner counts as full.`;
}

/** What a user reads when a sandbox volume was full. */
export function diskFull(volume: FullVolume, limits: Partial<Pick<Limits, 'workspaceSizeLimit' | 'tmpSizeLimit' | 'workspaceMedium'>>): Classification {
  const size = volume === 'workspace' ? limits.workspaceSizeLimit : limits.tmpSizeLimit;
  const entries = volume === 'workspace' ? entriesNote(size, limits.workspaceMedium) : '';
  const fewer = entries === '' ? '' : ', use fewer, larger files';
  return {
    phase: 'Failed',
    reason: Reasons.DiskFull,
    message: `${VOLUME_PATH[volume]} reached its size limit${size === undefined ? '' : ` (${size})`} and the program could not write more.${entries} Write less data (stream or compress it, delete intermediate files${fewer}) or ask the administrator for a larger limit.`,
  };
}

export function evicted(detail: string, limits: Pick<Limits, 'workspaceSizeLimit' | 'tmpSizeLimit'>): Classification {
  // The kubelet names the volume ("Usage of EmptyDir volume "workspace" exceeds the limit "64Mi"").
  const volume = /"workspace"/.test(detail) ? 'workspace' : /"tmp"/.test(detail) ? 'tmp' : undefined;
  const hint =
    volume === undefined
      ? 'Write less data to disk.'
      : `${VOLUME_PATH[volume]} is limited to ${volume === 'workspace' ? limits.workspaceSizeLimit : limits.tmpSizeLimit}: write less data (stream or compress it, delete intermediate files).`;
  return { phase: 'Failed', reason: Reasons.Evicted, message: `The sandbox pod was evicted by the kubelet: ${detail} ${hint}` };
}
