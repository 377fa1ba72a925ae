import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { SandboxRun } from '../../src/api/v1alpha1/index.js';
import { SANDBOX_LOG_PATH, SANDBOX_UID_BASE, buildRunPod, fileLimitBytes, mainCommand, sandboxPodOptions, sandboxUid } from '../../src/sandbox/pod.js';
import type { PodBuildOptions } from '../../src/sandbox/pod.js';

const SECRET_CODE = 'print("CODE-7f3a9c-must-not-leak")';
const SECRET_STDIN = 'STDIN-42b1e0-must-not-leak';

const run: SandboxRun = {
  apiVersion: 'codemode.dev/v1alpha1',
  kind: 'SandboxRun',
  metadata: { name: 'run-abc123', namespace: 'codemode', uid: 'uid-1' },
  spec: { language: 'javascript', code: SECRET_CODE, stdin: SECRET_STDIN, timeoutSeconds: 30 },
};

const opts: PodBuildOptions = {
  image: 'codemode.local/sandbox:v1',
  imagePullPolicy: 'IfNotPresent',
  cpuLimit: '1',
  memoryLimit: '512Mi',
  cpuRequest: '100m',
  memoryRequest: '128Mi',
  ephemeralStorageLimit: '1Gi',
  workspaceSizeLimit: '512Mi',
  tmpSizeLimit: '128Mi',
  activeDeadlineSeconds: 150,
};

/** Reads `a.b[0].c` from an object, so expectations can be written as a flat table. */
function at(obj: unknown, path: string): unknown {
  return path.split(/\.|(?=\[)/).reduce<unknown>((cur, part) => {
    if (cur === undefined || cur === null) return undefined;
    const index = /^\[(\d+)\]$/.exec(part);
    return (cur as Record<string, unknown>)[index ? Number(index[1]) : part];
  }, obj);
}

const pod = buildRunPod(run, opts);

describe('buildRunPod', () => {
  it.each<[string, unknown]>([
    // identity and ownership
    ['metadata.name', 'sbr-run-abc123'],
    ['metadata.namespace', 'codemode'],
    [
      'metadata.labels',
      {
        'app.kubernetes.io/managed-by': 'codemode-operator',
        'codemode.dev/sandbox': 'true',
        'codemode.dev/run': 'run-abc123',
        'codemode.dev/runtime': 'node',
      },
    ],
    [
      'metadata.ownerReferences',
      [
        {
          apiVersion: 'codemode.dev/v1alpha1',
          kind: 'SandboxRun',
          name: 'run-abc123',
          uid: 'uid-1',
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    ],
    // pod-level hardening
    ['spec.restartPolicy', 'Never'],
    ['spec.automountServiceAccountToken', false],
    ['spec.enableServiceLinks', false],
    ['spec.shareProcessNamespace', true],
    ['spec.hostNetwork', false],
    ['spec.hostPID', false],
    ['spec.hostIPC', false],
    ['spec.terminationGracePeriodSeconds', 1],
    ['spec.activeDeadlineSeconds', 150],
    ['spec.dnsPolicy', undefined],
    ['spec.runtimeClassName', undefined],
    // its own user (the run's), group nogroup
    [
      'spec.securityContext',
      { runAsUser: sandboxUid('uid-1'), runAsGroup: 65534, fsGroup: 65534, runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
    ],
    // the one container
    ['spec.containers.length', 1],
    ['spec.containers[0].name', 'sandbox'],
    ['spec.containers[0].image', 'codemode.local/sandbox:v1'],
    ['spec.containers[0].imagePullPolicy', 'IfNotPresent'],
    // sleep under the file limit, its stdout and stderr /dev/null (not the container log)
    ['spec.containers[0].command', mainCommand(['sleep', 'infinity'], '/dev/null')],
    ['spec.containers[0].args', undefined],
    ['spec.containers[0].workingDir', '/workspace'],
    // out of the sandbox user's reach (the node's disk, counted in no limit)
    ['spec.containers[0].terminationMessagePath', '/root/codemode-termination-log'],
    [
      'spec.containers[0].env',
      [
        { name: 'HOME', value: '/workspace' },
        { name: 'USER', value: 'sandbox' },
        { name: 'LOGNAME', value: 'sandbox' },
        { name: 'TMPDIR', value: '/tmp' },
        { name: 'PYTHONUNBUFFERED', value: '1' },
        { name: 'PYTHONDONTWRITEBYTECODE', value: '1' },
        { name: 'CODEMODE_WORKSPACE_LIMIT_BYTES', value: String(512 * 1024 * 1024) },
        // No file may be larger than the larger of /workspace and /tmp, and a MiB (RLIMIT_FSIZE).
        { name: 'CODEMODE_FILE_LIMIT_BYTES', value: String(513 * 1024 * 1024) },
        // Code starts only once the pod has no network (runner, kernels).
        { name: 'CODEMODE_NETWORK_CHECK', value: '1' },
      ],
    ],
    ['spec.containers[0].securityContext.readOnlyRootFilesystem', true],
    ['spec.containers[0].securityContext.allowPrivilegeEscalation', false],
    ['spec.containers[0].securityContext.privileged', false],
    ['spec.containers[0].securityContext.capabilities', { drop: ['ALL'] }],
    ['spec.containers[0].securityContext.runAsNonRoot', true],
    ['spec.containers[0].securityContext.runAsUser', sandboxUid('uid-1')],
    ['spec.containers[0].securityContext.seccompProfile', { type: 'RuntimeDefault' }],
    ['spec.containers[0].stdin', undefined],
    ['spec.containers[0].tty', undefined],
    ['spec.containers[0].resources.requests', { cpu: '100m', memory: '128Mi', 'ephemeral-storage': '64Mi' }],
    ['spec.containers[0].resources.limits', { cpu: '1', memory: '512Mi', 'ephemeral-storage': '1Gi' }],
    [
      'spec.containers[0].volumeMounts',
      [
        { name: 'workspace', mountPath: '/workspace' },
        { name: 'tmp', mountPath: '/tmp' },
      ],
    ],
    [
      'spec.volumes',
      [
        { name: 'workspace', emptyDir: { sizeLimit: '512Mi' } },
        { name: 'tmp', emptyDir: { medium: 'Memory', sizeLimit: '128Mi' } },
      ],
    ],
  ])('%s = %j', (path, expected) => {
    expect(at(pod, path)).toEqual(expected);
  });

  it('contains nothing the user submitted', () => {
    const text = JSON.stringify(pod);
    expect(text).not.toContain('CODE-7f3a9c');
    expect(text).not.toContain('STDIN-42b1e0');
  });

  it('is pure: the same inputs build the same pod', () => {
    expect(buildRunPod(run, opts)).toEqual(pod);
  });

  it('sets the runtime class when configured', () => {
    expect(buildRunPod(run, { ...opts, runtimeClassName: 'gvisor' }).spec?.runtimeClassName).toBe('gvisor');
  });

  it.each<[Partial<PodBuildOptions>, Record<string, string>]>([
    [
      { cpuLimit: '50m', memoryLimit: '64Mi' },
      { cpu: '50m', memory: '64Mi', 'ephemeral-storage': '64Mi' },
    ],
    [{ ephemeralStorageLimit: '32Mi' }, { cpu: '100m', memory: '128Mi', 'ephemeral-storage': '32Mi' }],
    [
      { cpuRequest: '2', cpuLimit: '1' },
      { cpu: '1', memory: '128Mi', 'ephemeral-storage': '64Mi' },
    ],
  ])('caps requests at the limits: %j', (override, requests) => {
    const built = buildRunPod(run, { ...opts, ...override });
    expect(built.spec?.containers[0]?.resources?.requests).toEqual(requests);
  });

  it.each<[string, string]>([
    ['python', 'python'],
    ['bash', 'bash'],
    ['sh', 'sh'],
    ['node', 'node'],
  ])('labels a %s run with runtime %s', (language, runtime) => {
    const built = buildRunPod({ ...run, spec: { ...run.spec, language: language as 'python' } }, opts);
    expect(built.metadata?.labels?.['codemode.dev/runtime']).toBe(runtime);
  });

  it('keeps names and labels valid for a 200-character run name', () => {
    const name = `r${'x'.repeat(199)}`;
    const built = buildRunPod({ ...run, metadata: { ...run.metadata, name } }, opts);
    expect(built.metadata?.name?.length).toBeLessThanOrEqual(63);
    expect(built.metadata?.labels?.['codemode.dev/run']?.length).toBeLessThanOrEqual(63);
    expect(built.metadata?.ownerReferences?.[0]?.name).toBe(name);
  });

  it('starts a kernel with the runtime mounted read-only when given one (code mode), keeping everything else', () => {
    const kernel = {
      command: ['python3', '/codemode/runtime/python/kernel.py'],
      runtime: { configMap: 'codemode-runtime-abc', items: [{ key: 'k', path: 'p' }] },
    };
    const built = buildRunPod(run, opts, kernel);
    expect(built.spec?.containers[0]?.command).toEqual(mainCommand(kernel.command, SANDBOX_LOG_PATH));
    expect(built.spec?.volumes?.find((v) => v.name === 'runtime')?.configMap).toEqual({
      name: 'codemode-runtime-abc',
      defaultMode: 0o444,
      items: kernel.runtime.items,
    });
    expect(built.spec?.containers[0]?.volumeMounts?.find((m) => m.name === 'runtime')).toEqual({
      name: 'runtime',
      mountPath: '/codemode/runtime',
      readOnly: true,
    });
    // Everything else is the plain run pod's: same owner, labels, hardening, limits and deadline.
    const c = built.spec?.containers[0];
    const rest = {
      ...built,
      spec: {
        ...built.spec,
        volumes: built.spec?.volumes?.filter((v) => v.name !== 'runtime'),
        containers: [{ ...c, command: pod.spec?.containers[0]?.command, volumeMounts: c?.volumeMounts?.filter((m) => m.name !== 'runtime') }],
      },
    };
    expect(rest).toEqual(pod);
  });

  it('refuses a run without uid (the owner reference would be invalid)', () => {
    const metadata = { ...run.metadata, uid: undefined };
    expect(() => buildRunPod({ ...run, metadata }, opts)).toThrow(/has no metadata.uid/);
  });
});

/** The administrator's settings of sandboxPodOptions. */
const SETTINGS = {
  imagePullPolicy: 'Never' as const,
  defaultCpu: '1',
  defaultMemory: '512Mi',
  cpuRequest: '100m',
  memoryRequest: '128Mi',
  ephemeralStorageLimit: '1Gi',
  workspaceSizeLimit: '512Mi',
  tmpSizeLimit: '128Mi',
};

describe('sandboxPodOptions (one mapping from the settings for every sandbox pod)', () => {
  const settings = SETTINGS;
  it.each([
    ['the defaults', {}, { cpuLimit: '1', memoryLimit: '512Mi' }],
    ["a run's own limits", { cpuLimit: '500m', memoryLimit: '64Mi' }, { cpuLimit: '500m', memoryLimit: '64Mi' }],
  ])('%s', (_n, limits, expected) => {
    const o = sandboxPodOptions(settings, { image: 'img', activeDeadlineSeconds: 90, ...limits });
    expect(o).toMatchObject({ image: 'img', activeDeadlineSeconds: 90, cpuRequest: '100m', memoryRequest: '128Mi', ...expected });
    expect(o).not.toHaveProperty('runtimeClassName');
  });
  it.each([
    ['no acceptance', undefined, true],
    ['other checks accepted', ['memory_limit'], true],
    ['an unenforced network accepted', ['network', 'memory_limit'], false],
  ])('checks the network before code starts unless it was accepted as unenforced: %s', (_n, acceptUnenforced, check) => {
    expect(sandboxPodOptions({ ...settings, ...(acceptUnenforced && { acceptUnenforced }) }, { image: 'i', activeDeadlineSeconds: 1 }).networkCheck).toBe(
      check,
    );
    const env = buildRunPod(run, { ...opts, networkCheck: check }).spec?.containers[0]?.env ?? [];
    expect(env.some((e) => e.name === 'CODEMODE_NETWORK_CHECK')).toBe(check);
  });
  it('keeps a RuntimeClass', () => {
    expect(sandboxPodOptions({ ...settings, runtimeClassName: 'gvisor' }, { image: 'i', activeDeadlineSeconds: 1 }).runtimeClassName).toBe('gvisor');
  });
  it("keeps a profile's placement, and the pod runs where it says", () => {
    const placement = { nodeSelector: { pool: 'sandbox' }, tolerations: [{ key: 'dedicated', operator: 'Exists' as const, effect: 'NoSchedule' as const }] };
    const o = sandboxPodOptions({ ...settings, ...placement }, { image: 'i', activeDeadlineSeconds: 1 });
    expect(o).toMatchObject(placement);
    expect(buildRunPod(run, o).spec).toMatchObject(placement);
    expect(sandboxPodOptions(settings, { image: 'i', activeDeadlineSeconds: 1 })).not.toHaveProperty('nodeSelector');
    expect(buildRunPod(run, opts).spec).not.toHaveProperty('tolerations');
  });
});

describe("/workspace's medium", () => {
  const settings = { ...SETTINGS, workspaceSizeLimit: '256Mi' };
  const workspaceOf = (p: ReturnType<typeof buildRunPod>) => p.spec?.volumes?.find((v) => v.name === 'workspace');
  const limitEnv = (p: ReturnType<typeof buildRunPod>) => p.spec?.containers[0]?.env?.find((e) => e.name === 'CODEMODE_WORKSPACE_LIMIT_BYTES')?.value;
  it.each<[string, 'Disk' | 'Memory' | undefined, object, string]>([
    // On disk the runner and the kernel measure it; the pod is the object it was before the setting existed.
    ['unset: on the node’s disk', undefined, { sizeLimit: '256Mi' }, String(256 * 1024 * 1024)],
    ['Disk', 'Disk', { sizeLimit: '256Mi' }, String(256 * 1024 * 1024)],
    // A tmpfs is its own hard limit: nothing to walk.
    ['Memory: a tmpfs of the size limit', 'Memory', { medium: 'Memory', sizeLimit: '256Mi' }, '0'],
  ])('%s', (_n, workspaceMedium, emptyDir, env) => {
    const o = sandboxPodOptions({ ...settings, ...(workspaceMedium !== undefined && { workspaceMedium }) }, { image: 'i', activeDeadlineSeconds: 1 });
    const p = buildRunPod(run, o);
    expect(workspaceOf(p)).toEqual({ name: 'workspace', emptyDir });
    expect(limitEnv(p)).toBe(env);
    if (workspaceMedium !== 'Memory') expect(o).not.toHaveProperty('workspaceMedium');
  });
});

describe('the file limit of sandbox processes', () => {
  it.each([
    ['512Mi', '128Mi', 513 * 1024 * 1024],
    ['16Mi', '64Mi', 65 * 1024 * 1024],
    ['1G', '1Mi', 1e9 + 1024 * 1024],
  ])('/workspace %s and /tmp %s: no file larger than %i bytes', (workspaceSizeLimit, tmpSizeLimit, bytes) => {
    expect(fileLimitBytes({ workspaceSizeLimit, tmpSizeLimit })).toBe(bytes);
  });

  // The container's command run by this machine's /bin/sh: the limit is a hard one, and the
  // command's output goes to the file (in the pod: not the container log), in a directory it
  // makes 0700; /dev/null reaches nobody.
  it.each([['a file'], ['/dev/null']])('output to %s: the command runs under the limit as a hard one, its output in the file only', async (to) => {
    const dir = await mkdtemp(join(tmpdir(), 'main-command-'));
    const file = to === 'a file' ? join(dir, 'log', 'kernel.log') : '/dev/null';
    const passwd = join(dir, 'passwd');
    const [sh, ...args] = mainCommand(['sh', '-c', 'ulimit -S -f; ulimit -H -f >&2; ulimit -S -c; ulimit -H -c'], file, passwd);
    const out = await promisify(execFile)(sh!, args, { env: { PATH: process.env.PATH, CODEMODE_FILE_LIMIT_BYTES: String(64 * 1024 * 1024) } });
    expect(out).toMatchObject({ stdout: '', stderr: '' });
    // The user's passwd line (SANDBOX_PASSWD_PATH in the pod), with the uid and gid it runs as.
    expect(await readFile(passwd, 'utf8')).toBe(`sandbox:x:${process.getuid?.()}:${process.getgid?.()}:sandbox:/workspace:/bin/sh\n`);
    if (to === 'a file') {
      const blocks = (64 * 1024 * 1024) / 512;
      // and no core dumps, hard too.
      expect(await readFile(file, 'utf8')).toBe(`${blocks}\n${blocks}\n0\n0\n`);
      expect((await stat(join(dir, 'log'))).mode & 0o777).toBe(0o700);
    }
    await rm(dir, { recursive: true, force: true });
  });

  it('starts the command when its passwd line cannot be written', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'main-command-'));
    const [sh, ...args] = mainCommand(['echo', 'started'], join(dir, 'out'), join(dir, 'missing', 'passwd'));
    const out = await promisify(execFile)(sh!, args, { env: { PATH: process.env.PATH, CODEMODE_FILE_LIMIT_BYTES: '1048576' } });
    expect(out).toMatchObject({ stdout: '', stderr: '' });
    expect(await readFile(join(dir, 'out'), 'utf8')).toBe('started\n');
    await rm(dir, { recursive: true, force: true });
  });

  it('refuses to start the command without the limit', async () => {
    const [file, ...args] = mainCommand(['echo', 'started'], '/dev/null', '/dev/null');
    const err = await promisify(execFile)(file!, args, { env: { PATH: process.env.PATH } }).catch((e: unknown) => e as { code: number; stdout: string });
    expect(err).toMatchObject({ code: 125, stdout: '' });
  });
});

describe('the user of a sandbox pod', () => {
  // Its own: the kernel counts inotify instances, message queue bytes and pipe pages per user
  // across the node, so a shared user let one sandbox exhaust them for all.
  it.each([['uid-1'], ['a-session-uid'], [''], ['ffffffff-ffff-ffff-ffff-ffffffffffff']])('is one of the range for %j, the same every time', (seed) => {
    const uid = sandboxUid(seed);
    expect(Number.isInteger(uid) && uid >= SANDBOX_UID_BASE && uid <= 2 ** 31 - 1).toBe(true);
    expect(sandboxUid(seed)).toBe(uid);
  });

  it('differs between pods', () => {
    const uids = new Set(Array.from({ length: 1000 }, (_, i) => sandboxUid(`run-${i}`)));
    expect(uids.size).toBe(1000);
  });
});
