// Why a sandbox pod stopped, read from its status: a session kernel that ended its session for its
// /workspace (exit code 4) is told apart from other exits, with the volume's size limit.
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { KERNEL_WORKSPACE_OVER_EXIT_CODE, podFailure } from '../../../src/sandbox/pod-failure.js';
import { podState } from '../../../src/sandbox/pod-state.js';

const stopped = (terminated: { exitCode: number; reason?: string }, sizeLimit?: string): V1Pod => ({
  spec: {
    containers: [{ name: 'sandbox' }],
    volumes: [
      { name: 'workspace', emptyDir: sizeLimit === undefined ? {} : { sizeLimit } },
      { name: 'tmp', emptyDir: { medium: 'Memory' } },
    ],
  },
  status: { phase: 'Failed', containerStatuses: [{ name: 'sandbox', image: 'i', imageID: '', ready: false, restartCount: 0, state: { terminated } }] },
});

const OVER =
  /^\/workspace on the node's disk went over its size limit \(64Mi, each file or directory counting at least 4 KiB, open deleted files included, a directory it could not read as full\), so the interpreter was stopped and the session's files deleted\.$/;

describe('podFailure', () => {
  it.each([
    ['the workspace exit code, with the size limit', stopped({ exitCode: KERNEL_WORKSPACE_OVER_EXIT_CODE, reason: 'Error' }, '64Mi'), 'DiskFull', OVER],
    [
      'the workspace exit code, no size limit in the spec',
      stopped({ exitCode: 4, reason: 'Error' }),
      'DiskFull',
      /^\/workspace on the node's disk went over its size limit \(each file or directory counting at least 4 KiB, open deleted files included, a directory it could not read as full\)/,
    ],
    ['an OOM kill (exit code 137)', stopped({ exitCode: 137, reason: 'OOMKilled' }, '64Mi'), 'OOMKilled', /OOM-killed/],
  ])('%s', (_n, pod, reason, detail) => {
    expect(podFailure(pod)).toMatchObject({ reason, detail: expect.stringMatching(detail) as string });
  });

  it.each([
    ['the network check', 3],
    ['a SIGKILL', 137],
    ['an error', 1],
  ])('names no failure for another exit: %s', (_n, exitCode) => {
    expect(podFailure(stopped({ exitCode, reason: 'Error' }, '64Mi'))).toBeUndefined();
  });
});

describe('podState', () => {
  it.each([
    [
      'the workspace exit code',
      stopped({ exitCode: 4, reason: 'Error' }, '64Mi'),
      'DiskFull',
      /^The session's \/workspace on the node's disk went over its size limit \(64Mi, /,
    ],
    ['another exit code', stopped({ exitCode: 1, reason: 'Error' }, '64Mi'), 'PodFailed', /^The sandbox pod stopped: Error\.$/],
  ])('a failed pod, %s', (_n, pod, reason, message) => {
    expect(podState(pod)).toMatchObject({ kind: 'failed', reason, message: expect.stringMatching(message) as string });
  });
});
