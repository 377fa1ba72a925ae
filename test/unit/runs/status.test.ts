import { describe, expect, it } from 'vitest';
import type { V1Pod } from '@kubernetes/client-node';
import type { SandboxRun } from '../../../src/api/v1alpha1/index.js';
import { classifyExecution, completedStatus, failedStatus, invalidRunStatus, runningStatus, type ExecutionFacts } from '../../../src/runs/status.js';
import { setCondition } from '../../../src/api/v1alpha1/index.js';
import { podState } from '../../../src/sandbox/pod-state.js';
import { lostAfterMs, ttlRemainingMs } from '../../../src/controller/run-decision.js';
import { KERNEL_NOT_ISOLATED_EXIT_CODE, kernelRefusedNetwork, outOfMemory, podFailure, podStopped } from '../../../src/sandbox/pod-failure.js';
import { SANDBOX_CONTAINER, buildRunPod } from '../../../src/sandbox/pod.js';

const limits = { maxTimeoutSeconds: 300, memoryLimit: '512Mi', maxMemory: '2Gi', workspaceSizeLimit: '512Mi', tmpSizeLimit: '128Mi' };
const now = new Date('2026-11-22T10:00:00.000Z');

function run(status?: SandboxRun['status'], spec: Partial<SandboxRun['spec']> = {}): SandboxRun {
  return {
    apiVersion: 'codemode.dev/v1alpha1',
    kind: 'SandboxRun',
    metadata: { name: 'r', namespace: 'ns', uid: 'u1', generation: 1, creationTimestamp: '2026-11-22T09:59:00Z' },
    spec: { language: 'python', code: 'print(1)', timeoutSeconds: 30, ...spec },
    status,
  };
}

const facts = (f: Partial<ExecutionFacts>): ExecutionFacts => ({
  timedOut: false,
  oomKilled: false,
  runnerReported: true,
  watchdogFired: false,
  podGone: false,
  ...f,
});

describe('exec errors that quote the sandbox', () => {
  it.each([
    ['refused', false, /could not be run in the sandbox: KernelError: red  \[31m text  next\./],
    ['broken after the code was sent', true, /broke after the code was sent \(KernelError: red  \[31m text  next\)/],
  ])('%s: control characters become spaces', (_name, codeSent, message) => {
    const c = classifyExecution(facts({ runnerReported: false, execError: 'KernelError: red \u001b[31m text\r\nnext', codeSent }), 30, limits);
    expect(c.message).toMatch(message);
    expect(c.message).not.toMatch(/[\u0000-\u001f]/);
  });
});

describe('classifyExecution', () => {
  it.each([
    ['exit 0', facts({ exitCode: 0 }), 'Succeeded', 'Succeeded', 0],
    ['exit 2', facts({ exitCode: 2 }), 'Failed', 'NonZeroExit', 2],
    ['runner saw the deadline', facts({ exitCode: 124, timedOut: true }), 'TimedOut', 'DeadlineExceeded', 124],
    ['OOM kill', facts({ exitCode: 137, oomKilled: true }), 'Failed', 'OOMKilled', 137],
    ['OOM of a child, program still exited 0', facts({ exitCode: 0, oomKilled: true }), 'Succeeded', 'Succeeded', 0],
    ['watchdog, no trailer', facts({ runnerReported: false, watchdogFired: true, execError: 'no result' }), 'TimedOut', 'DeadlineExceeded', undefined],
    ['pod deleted mid-run', facts({ runnerReported: false, podGone: true, execError: 'closed' }), 'Failed', 'PodDeleted', undefined],
    ['exec transport failure', facts({ runnerReported: false, execError: 'connection refused' }), 'Failed', 'ExecFailed', undefined],
    ['runner killed by SIGKILL', facts({ runnerReported: false, exitCode: 137 }), 'Failed', 'OOMKilled', 137],
    ['runner died otherwise', facts({ runnerReported: false, exitCode: 125 }), 'Failed', 'ExecFailed', 125],
  ])('%s', (_name, f, phase, reason, exitCode) => {
    const c = classifyExecution(f, 30, limits);
    expect(c).toMatchObject({ phase, reason });
    expect(c.exitCode).toBe(exitCode);
    expect(c.message.length).toBeGreaterThan(10);
  });

  // Bounds the program ran into (issue 14): the bound explains a failure or a timeout better than
  // the exit code; a program that met one and still exited 0 succeeded.
  it.each([
    ['fork bomb stopped at the deadline', facts({ exitCode: 124, timedOut: true, processLimit: true }), 'Failed', 'ProcessLimit', 124],
    ['fork failed, program gave up', facts({ exitCode: 1, processLimit: true }), 'Failed', 'ProcessLimit', 1],
    ['fork bomb left behind by a program that exited 0', facts({ exitCode: 0, processLimit: true }), 'Failed', 'ProcessLimit', 0],
    ['/tmp full, write failed', facts({ exitCode: 1, diskFull: 'tmp' }), 'Failed', 'DiskFull', 1],
    ['/workspace over its limit, program stopped', facts({ exitCode: 137, diskFull: 'workspace' }), 'Failed', 'DiskFull', 137],
    ['/tmp full but the program exited 0', facts({ exitCode: 0, diskFull: 'tmp' }), 'Succeeded', 'Succeeded', 0],
    ['disk full and timed out', facts({ exitCode: 124, timedOut: true, diskFull: 'tmp' }), 'Failed', 'DiskFull', 124],
    ['process cap wins over a full disk', facts({ exitCode: 1, processLimit: true, diskFull: 'tmp' }), 'Failed', 'ProcessLimit', 1],
    ['OOM kill wins over a full disk', facts({ exitCode: 137, oomKilled: true, diskFull: 'workspace' }), 'Failed', 'OOMKilled', 137],
    ['OOM of a child, program ran into its deadline', facts({ exitCode: 124, timedOut: true, oomKilled: true }), 'TimedOut', 'DeadlineExceeded', 124],
    [
      'no report, container OOM-killed',
      facts({ runnerReported: false, execError: 'relay exited', podFailure: { reason: 'OOMKilled', detail: 'x' } }),
      'Failed',
      'OOMKilled',
      undefined,
    ],
    [
      'no report, pod evicted',
      facts({
        runnerReported: false,
        exitCode: 137,
        podFailure: { reason: 'Evicted', detail: 'Usage of EmptyDir volume "workspace" exceeds the limit "64Mi".' },
      }),
      'Failed',
      'Evicted',
      undefined,
    ],
    [
      'no report, evicted pod also deleted',
      facts({ runnerReported: false, podGone: true, execError: 'closed', podFailure: { reason: 'Evicted', detail: 'x.' } }),
      'Failed',
      'Evicted',
      undefined,
    ],
  ])('bound: %s', (_name, f, phase, reason, exitCode) => {
    const c = classifyExecution(f, 10, limits);
    expect(c).toMatchObject({ phase, reason });
    expect(c.exitCode).toBe(exitCode);
  });

  it.each([
    [{ ...limits, maxProcesses: 128 }, /allows 128 processes and threads.*stopped at timeoutSeconds=10.*bounded pool/],
    [limits, /allows a limited number of processes.*stopped at timeoutSeconds=10/],
  ])('names the process cap when it is known (%#)', (l, text) => {
    expect(classifyExecution(facts({ exitCode: 124, timedOut: true, processLimit: true }), 10, l).message).toMatch(text);
  });

  it.each([
    ['on disk', limits, /limit \(512Mi\) and was killed; files in \/tmp count as memory\. Use less memory \(or delete files\)/],
    ['in memory', { ...limits, workspaceMedium: 'Memory' as const }, /limit \(512Mi\) and was killed; files in \/tmp and \/workspace count as memory/],
  ])('an OOM kill says which files count as memory: /workspace %s', (_n, l, text) => {
    expect(classifyExecution(facts({ exitCode: 137, oomKilled: true }), 10, l).message).toMatch(text);
  });

  it.each([
    ['tmp', /^\/tmp reached its size limit \(16Mi\)/],
    ['workspace', /^\/workspace reached its size limit \(64Mi\)/],
  ] as const)('names the full volume and its limit: %s', (volume, text) => {
    const l = { ...limits, workspaceSizeLimit: '64Mi', tmpSizeLimit: '16Mi' };
    expect(classifyExecution(facts({ exitCode: 1, diskFull: volume }), 10, l).message).toMatch(text);
  });

  // On disk each entry counts at least 4 KiB (the runner and the kernel stop a program past it):
  // a user stopped for empty files reads why. A tmpfs charges them to memory instead.
  it.each([
    [
      'workspace on disk',
      'workspace',
      undefined,
      /\(64Mi\) and the program could not write more\. Each file or directory in it counts at least 4 KiB, so it holds at most 16384 of them; files deleted while a process still has them open count until closed, and a directory without read and search permission for its owner counts as full\. .*use fewer, larger files\)/,
    ],
    [
      'workspace in memory',
      'workspace',
      'Memory',
      /^\/workspace reached its size limit \(64Mi\) and the program could not write more\. Write less data \(stream or compress it, delete intermediate files\) or/,
    ],
    [
      'tmp',
      'tmp',
      undefined,
      /^\/tmp reached its size limit \(16Mi\) and the program could not write more\. Write less data \(stream or compress it, delete intermediate files\) or/,
    ],
  ] as const)('says how many files a full volume holds: %s', (_n, volume, medium, text) => {
    const l = { ...limits, workspaceSizeLimit: '64Mi', tmpSizeLimit: '16Mi', workspaceMedium: medium };
    expect(classifyExecution(facts({ exitCode: 137, diskFull: volume }), 10, l).message).toMatch(text);
  });

  it.each([
    [facts({ exitCode: 0, leftovers: 57 }), /^The program exited with code 0\. It left 57 processes running, killed when it exited.*session/],
    [facts({ exitCode: 0, leftovers: 1 }), /It left one process running/],
    [facts({ exitCode: 0, leftovers: 0 }), /^The program exited with code 0\.$/],
  ])('says what a program left running was killed (%#)', (f, text) => {
    expect(classifyExecution(f, 10, limits)).toMatchObject({ phase: 'Succeeded', message: expect.stringMatching(text) as string });
  });

  it.each([
    [facts({ exitCode: 3, stderrBytes: 10 }), 'The program exited with code 3; see stderr.'],
    [facts({ exitCode: 3, stderrBytes: 0 }), 'The program exited with code 3 and wrote nothing to stderr.'],
    // Unknown (an older report): pointing at stderr is the safe side.
    [facts({ exitCode: 3 }), 'The program exited with code 3; see stderr.'],
    [
      facts({ exitCode: 137, stderrBytes: 0 }),
      "The program exited with code 137 (128 + 9: a shell's code for a process ended by SIGKILL) and wrote nothing to stderr.",
    ],
    [facts({ exitCode: 143, stderrBytes: 5 }), "The program exited with code 143 (128 + 15: a shell's code for a process ended by SIGTERM); see stderr."],
    // Above 128 but no signal's number: only the code.
    [facts({ exitCode: 255, stderrBytes: 5 }), 'The program exited with code 255; see stderr.'],
    [facts({ exitCode: 128, stderrBytes: 5 }), 'The program exited with code 128; see stderr.'],
  ])('says where a non-zero exit is explained (%#)', (f, message) => {
    expect(classifyExecution(f, 10, limits)).toMatchObject({ phase: 'Failed', reason: 'NonZeroExit', message });
  });

  it('quotes the kubelet and the volume limit on eviction', () => {
    const f = facts({ runnerReported: false, podFailure: { reason: 'Evicted', detail: 'Usage of EmptyDir volume "workspace" exceeds the limit "64Mi".' } });
    expect(classifyExecution(f, 10, { ...limits, workspaceSizeLimit: '64Mi' }).message).toMatch(
      /evicted by the kubelet: Usage of EmptyDir volume "workspace".*\/workspace is limited to 64Mi/,
    );
  });

  it.each([
    ['the stream never opened', false, /^The code could not be run in the sandbox: refused\. It did not start; run it again\./],
    [
      'the stream broke after it opened',
      true,
      /^The connection to the sandbox broke after the code was sent \(refused\): it may have run.*only if repeating it is safe/,
    ],
    ['unknown whether it opened', undefined, /it may have run in part or in full, and its outcome is unknown/],
  ])('says whether code whose stream failed may have run: %s', (_name, codeSent, text) => {
    const f = facts({ runnerReported: false, execError: 'refused', ...(codeSent !== undefined && { codeSent }) });
    expect(classifyExecution(f, 10, limits)).toMatchObject({ phase: 'Failed', reason: 'ExecFailed', message: expect.stringMatching(text) as string });
  });

  it('says how to fix a timeout and an OOM kill', () => {
    expect(classifyExecution(facts({ exitCode: 124, timedOut: true }), 5, limits).message).toMatch(/timeoutSeconds=5.*maximum 300/);
    expect(classifyExecution(facts({ exitCode: 137, oomKilled: true }), 5, limits).message).toMatch(/512Mi.*resources.memory.*2Gi/);
  });
});

describe('setCondition', () => {
  const base = { type: 'Ready', status: 'True' as const, reason: 'PodRunning', message: '' };
  it('adds, replaces, and keeps the transition time when the status is unchanged', () => {
    const a = setCondition(undefined, base, new Date('2026-01-01T00:00:00Z'));
    expect(a).toEqual([{ ...base, lastTransitionTime: '2026-01-01T00:00:00.000Z' }]);
    const b = setCondition(a, { ...base, message: 'again' }, new Date('2026-01-02T00:00:00Z'));
    expect(b[0]?.lastTransitionTime).toBe('2026-01-01T00:00:00.000Z');
    const c = setCondition(b, { ...base, status: 'False' }, new Date('2026-01-03T00:00:00Z'));
    expect(c).toHaveLength(1);
    expect(c[0]?.lastTransitionTime).toBe('2026-01-03T00:00:00.000Z');
  });
});

describe('status computation', () => {
  it('running, then completed, keeps startTime and computes the duration', () => {
    const started = new Date('2026-11-22T09:59:58.000Z');
    const r1 = run(runningStatus(run(), 'sbr-r', started, started));
    expect(r1.status).toMatchObject({ phase: 'Running', podName: 'sbr-r', observedGeneration: 1 });
    const s = completedStatus(
      r1,
      { phase: 'Succeeded', reason: 'Succeeded', message: 'ok', exitCode: 0 },
      { stdout: '1\n', stderr: '', stdoutBytes: 2, stderrBytes: 0, truncated: false },
      { start: new Date(0), end: now },
    );
    expect(s).toMatchObject({
      phase: 'Succeeded',
      exitCode: 0,
      stdout: '1\n',
      durationMs: 2000,
      startTime: started.toISOString(),
      completionTime: now.toISOString(),
    });
    expect(s.conditions?.map((c) => [c.type, c.status])).toEqual([
      ['Ready', 'False'],
      ['Complete', 'True'],
    ]);
  });

  it('is a pure function: the same input gives the same status', () => {
    const a = failedStatus(run(), 'InvalidSpec', 'bad', now);
    const b = failedStatus(run(), 'InvalidSpec', 'bad', now);
    expect(a).toEqual(b);
    expect(a).toMatchObject({ phase: 'Failed', reason: 'InvalidSpec', message: 'bad' });
  });
});

describe('invalidRunStatus', () => {
  // `kubectl wait --for=condition=Complete` ends for a run the schema refuses, as for any other.
  it.each<[string, string, string]>([
    ['a short message', 'spec.code: too long', 'spec.code: too long'],
    ['a message with a line break (kubectl describe would draw a line of it)', 'a\nReason: Succeeded', 'a Reason: Succeeded'],
  ])('is Failed InvalidSpec with Complete True and Ready False: %s', (_what, message, shown) => {
    const s = invalidRunStatus(message, now);
    expect(s).toMatchObject({ phase: 'Failed', reason: 'InvalidSpec', completionTime: now.toISOString() });
    expect(s.message).toBe(shown);
    expect(s.conditions?.map((c) => [c.type, c.status, c.reason, c.lastTransitionTime])).toEqual([
      ['Complete', 'True', 'InvalidSpec', now.toISOString()],
      ['Ready', 'False', 'InvalidSpec', now.toISOString()],
    ]);
    expect(s.conditions?.[0]?.message).toBe(shown);
  });
});

function pod(p: Partial<V1Pod['status']> & { deleting?: boolean }): V1Pod {
  const { deleting, ...status } = p;
  return { metadata: { name: 'p', ...(deleting ? { deletionTimestamp: now } : {}) }, status };
}

describe('podState', () => {
  it.each([
    ['ready', pod({ phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] }), 'ready', undefined],
    ['running, not ready yet', pod({ phase: 'Running', conditions: [{ type: 'Ready', status: 'False' }] }), 'pending', undefined],
    ['just created', pod({}), 'pending', undefined],
    [
      'image missing',
      pod({
        phase: 'Pending',
        containerStatuses: [{ name: 'sandbox', image: 'x:1', imageID: '', ready: false, restartCount: 0, state: { waiting: { reason: 'ErrImageNeverPull' } } }],
      }),
      'failed',
      'ImageNotFound',
    ],
    [
      'image pull backoff',
      pod({
        phase: 'Pending',
        containerStatuses: [{ name: 'sandbox', image: 'x:1', imageID: '', ready: false, restartCount: 0, state: { waiting: { reason: 'ImagePullBackOff' } } }],
      }),
      'failed',
      'ImageNotFound',
    ],
    [
      'oom killed',
      pod({
        phase: 'Failed',
        containerStatuses: [
          { name: 'sandbox', image: 'x', imageID: '', ready: false, restartCount: 0, state: { terminated: { exitCode: 137, reason: 'OOMKilled' } } },
        ],
      }),
      'failed',
      'OOMKilled',
    ],
    ['deadline', pod({ phase: 'Failed', reason: 'DeadlineExceeded' }), 'failed', 'PodFailed'],
    ['being deleted', pod({ phase: 'Running', deleting: true }), 'failed', 'PodDeleted'],
  ])('%s', (_name, p, kind, reason) => {
    const s = podState(p);
    expect(s.kind).toBe(kind);
    if (reason) expect(s).toMatchObject({ reason });
  });

  it('explains an unschedulable pod', () => {
    const s = podState(
      pod({ phase: 'Pending', conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: '0/1 nodes: Insufficient memory' }] }),
    );
    expect(s).toEqual({ kind: 'pending', message: 'Unschedulable: 0/1 nodes: Insufficient memory' });
  });
});

describe('time math', () => {
  it.each([
    ['not finished', undefined, undefined, undefined],
    ['default TTL, just finished', '2026-11-22T10:00:00.000Z', undefined, 3_600_000],
    ['spec TTL, expired', '2026-11-22T09:59:00.000Z', 30, -30_000],
    ['TTL 0', '2026-11-22T10:00:00.000Z', 0, 0],
  ])('ttlRemainingMs: %s', (_name, completionTime, ttl, expected) => {
    const r = run(completionTime ? { phase: 'Succeeded', completionTime } : undefined, ttl === undefined ? {} : { ttlSecondsAfterFinished: ttl });
    expect(ttlRemainingMs(r, 3600, now)).toBe(expected);
  });

  it.each<[string, number | undefined, number]>([
    ['a spec TTL above the maximum is shortened to it', 7200, 600_000],
    ['a spec TTL below the maximum is kept', 300, -300_000],
    ['the default is shortened too', undefined, 600_000],
  ])('ttlRemainingMs with a maximum of 1200 s: %s', (_name, ttl, expected) => {
    // Finished 10 minutes before "now".
    const r = run({ phase: 'Succeeded', completionTime: '2026-11-22T09:50:00.000Z' }, ttl === undefined ? {} : { ttlSecondsAfterFinished: ttl });
    expect(ttlRemainingMs(r, 3600, now, 1200)).toBe(expected);
  });

  it.each([
    // created 09:59:00, budget 120 + 30 + 60 s → 10:02:30, i.e. 150 s after "now".
    ['a transient run: start-up allowance + timeout + a minute after creation', {}, 0, 150_000],
    ['a transient run does not wait for packages', {}, 300, 150_000],
    ['a run in a session may also wait for its packages', { session: 's' }, 300, 450_000],
    ['a run in a session without a packages allowance', { session: 's' }, 0, 150_000],
  ])('lostAfterMs: %s', (_what, spec: Partial<SandboxRun['spec']>, packages, expected) => {
    expect(lostAfterMs(run(undefined, spec), 120, now, packages)).toBe(expected);
  });
});

describe('podFailure', () => {
  const pod = (status: V1Pod['status']): V1Pod => ({ metadata: { name: 'p' }, status });
  it.each([
    ['no pod', undefined, undefined],
    [
      'running',
      pod({ phase: 'Running', containerStatuses: [{ name: 'sandbox', image: 'i', imageID: '', ready: true, restartCount: 0, state: { running: {} } }] }),
      undefined,
    ],
    [
      'container OOM-killed',
      pod({
        phase: 'Failed',
        containerStatuses: [
          { name: 'sandbox', image: 'i', imageID: '', ready: false, restartCount: 0, state: { terminated: { exitCode: 137, reason: 'OOMKilled' } } },
        ],
      }),
      'OOMKilled',
    ],
    [
      'OOM in lastState',
      pod({
        phase: 'Running',
        containerStatuses: [
          { name: 'sandbox', image: 'i', imageID: '', ready: false, restartCount: 1, lastState: { terminated: { exitCode: 137, reason: 'OOMKilled' } } },
        ],
      }),
      'OOMKilled',
    ],
    [
      'container exited with an error',
      pod({
        phase: 'Failed',
        containerStatuses: [
          { name: 'sandbox', image: 'i', imageID: '', ready: false, restartCount: 0, state: { terminated: { exitCode: 1, reason: 'Error' } } },
        ],
      }),
      undefined,
    ],
    ['evicted', pod({ phase: 'Failed', reason: 'Evicted', message: 'Usage of EmptyDir volume "workspace" exceeds the limit "64Mi". ' }), 'Evicted'],
  ])('%s', (_name, p, reason) => {
    expect(podFailure(p)?.reason).toBe(reason);
  });

  // The pod as the gateway builds it: its memory limit and its volumes in memory, read from its spec.
  it.each([
    ['Disk', ['/tmp'], 'the container was OOM-killed; files in /tmp count as memory.'],
    ['Memory', ['/tmp', '/workspace'], 'the container was OOM-killed; files in /tmp and /workspace count as memory.'],
  ] as const)('an OOM kill names the limit and the directories in memory: /workspace on %s', (workspaceMedium, tmpfs, detail) => {
    const built = buildRunPod(run(), {
      image: 'i',
      imagePullPolicy: 'IfNotPresent',
      cpuLimit: '1',
      memoryLimit: '384Mi',
      cpuRequest: '100m',
      memoryRequest: '128Mi',
      ephemeralStorageLimit: '1Gi',
      workspaceSizeLimit: '64Mi',
      tmpSizeLimit: '32Mi',
      activeDeadlineSeconds: 60,
      workspaceMedium,
    });
    const oomKilled = {
      name: SANDBOX_CONTAINER,
      image: 'i',
      imageID: '',
      ready: false,
      restartCount: 0,
      state: { terminated: { exitCode: 137, reason: 'OOMKilled' } },
    };
    const f = podFailure({ ...built, status: { phase: 'Failed', containerStatuses: [oomKilled] } });
    expect(f).toEqual({ reason: 'OOMKilled', detail, memory: { limit: '384Mi', tmpfs } });
    expect(outOfMemory(f?.memory)).toBe(`used more memory than its limit (384Mi) and was killed; ${detail.replace(/^.*; /, '').replace(/\.$/, '')}`);
  });

  it('bounds the kubelet message and ends it with a full stop', () => {
    expect(podFailure(pod({ reason: 'Evicted', message: 'x'.repeat(5000) }))?.detail.length).toBeLessThanOrEqual(301);
    expect(podFailure(pod({ reason: 'Evicted', message: ' disk  pressure ' }))?.detail).toBe('disk pressure.');
  });
});

describe('kernelRefusedNetwork', () => {
  const container = (state: { exitCode: number } | undefined, last?: { exitCode: number }) => ({
    name: 'sandbox',
    image: 'i',
    imageID: '',
    ready: false,
    restartCount: 0,
    ...(state && { state: { terminated: state } }),
    ...(last && { lastState: { terminated: last } }),
  });
  const pod = (...containerStatuses: ReturnType<typeof container>[]): V1Pod => ({ metadata: { name: 'p' }, status: { phase: 'Failed', containerStatuses } });
  it.each([
    ['no pod', undefined, false],
    ['no container status yet', { metadata: { name: 'p' }, status: { phase: 'Pending' } } as V1Pod, false],
    ['the kernel exited with the network code', pod(container({ exitCode: KERNEL_NOT_ISOLATED_EXIT_CODE })), true],
    ['the network code in lastState', pod(container(undefined, { exitCode: KERNEL_NOT_ISOLATED_EXIT_CODE })), true],
    ['another exit code', pod(container({ exitCode: 1 })), false],
    ['killed', pod(container({ exitCode: 137 })), false],
    ['still running', pod(container(undefined)), false],
  ])('%s', (_name, p, refused) => {
    expect(kernelRefusedNetwork(p)).toBe(refused);
  });

  it('is the code both kernels exit with when their pod can reach the network', async () => {
    const { readFile } = await import('node:fs/promises');
    const python = await readFile(new URL('../../../runtime/python/codemode_kernel/server.py', import.meta.url), 'utf8');
    const node = await readFile(new URL('../../../runtime/node/kernel.js', import.meta.url), 'utf8');
    expect(python).toMatch(
      new RegExp(
        `Refused to start: the pod could still reach the network[^\\n]*\\n\\s+oneshot\\.discard\\(\\)\\n\\s+sys\\.exit\\(${KERNEL_NOT_ISOLATED_EXIT_CODE}\\)`,
      ),
    );
    expect(node).toMatch(new RegExp(`Refused to start: the pod could still reach the network[^\\n]*\\n\\s+exitKernel\\(${KERNEL_NOT_ISOLATED_EXIT_CODE}\\)`));
  });
});

describe('podStopped', () => {
  const cs = (state: NonNullable<NonNullable<V1Pod['status']>['containerStatuses']>[number]['state']) => ({
    name: 'sandbox',
    image: 'i',
    imageID: '',
    ready: false,
    restartCount: 0,
    state,
  });
  it.each([
    ['no pod (gone)', undefined, true],
    ['running', { metadata: { name: 'p' }, status: { phase: 'Running', containerStatuses: [cs({ running: {} })] } }, false],
    ['pending, no status yet', { metadata: { name: 'p' }, status: { phase: 'Pending' } }, false],
    ['being deleted', { metadata: { name: 'p', deletionTimestamp: new Date() }, status: { phase: 'Running' } }, true],
    ['evicted', { metadata: { name: 'p' }, status: { phase: 'Failed', reason: 'Evicted' } }, true],
    ['finished', { metadata: { name: 'p' }, status: { phase: 'Succeeded' } }, true],
    [
      'container terminated, phase not updated yet',
      { metadata: { name: 'p' }, status: { phase: 'Running', containerStatuses: [cs({ terminated: { exitCode: 137 } })] } },
      true,
    ],
  ] as Array<[string, V1Pod | undefined, boolean]>)('%s', (_name, p, stopped) => {
    expect(podStopped(p)).toBe(stopped);
  });
});
