// The sandbox pod: a locked-down container that only sleeps. The code never appears in the pod
// spec; it arrives later through the exec API, so nothing user-controlled reaches the kubelet.
import type {
  V1Container,
  V1OwnerReference,
  V1Pod,
  V1PodSecurityContext,
  V1PodSpec,
  V1SecurityContext,
  V1Volume,
  V1VolumeMount,
} from '@kubernetes/client-node';
import {
  API_VERSION,
  BUILTIN_PROFILE,
  LABEL_PROFILE,
  LABEL_MANAGED_BY,
  LABEL_RUN,
  LABEL_RUNTIME,
  LABEL_SANDBOX,
  MANAGED_BY_VALUE,
  SANDBOX_LABEL_VALUE,
  SANDBOXRUN_KIND,
  SANDBOXSESSION_KIND,
  LABEL_SESSION,
  kernelLanguage,
  normalizeLanguage,
} from '../api/v1alpha1/index.js';
import type { KernelLanguage, SandboxRun, SandboxSession, Toleration, WorkspaceMedium } from '../api/v1alpha1/index.js';
import { parseQuantity } from '../config/quantity.js';
import { createHash, randomUUID } from 'node:crypto';
import { podNameForRun, podNameForSession, runLabelValue } from './names.js';
import type { RuntimeVolume } from './runtime-configmap.js';
import { podTemplateHash } from './template-hash.js';

export const SANDBOX_CONTAINER = 'sandbox';
export const WORKSPACE_DIR = '/workspace';
export const TMP_DIR = '/tmp';
/** Where the runtime ConfigMap (session kernels) is mounted, read-only. */
export const RUNTIME_DIR = '/codemode/runtime';
/**
 * `nobody`: exists in every base image and owns nothing. The group of every sandbox process and
 * the user of the pods that run no one's code (the package fetcher, the self-check's echo pod).
 */
export const SANDBOX_UID = 65534;
/**
 * Sandbox pods each run as a user of their own, from this range (2^30 to 2^31 - 1, above any
 * user an image or a node defines). The kernel counts some resources per user across the whole
 * node, not per pod: inotify instances (128), POSIX message queue bytes, pipe buffer pages. As
 * one shared user, a sandbox holding its 128 inotify instances made inotify_init fail in every
 * other sandbox on the node, and in any other workload running as `nobody` (measured on the
 * test cluster). Its passwd entry (`sandbox`, home /workspace) is written by the container's
 * command (mainCommand) to SANDBOX_PASSWD_PATH; USER and LOGNAME are set too, for images that
 * do not read that file.
 */
export const SANDBOX_UID_BASE = 2 ** 30;

/**
 * The pod user's passwd line, in the pod's /tmp (the root file system is read-only). The sandbox
 * images read it through libnss-extrausers (/var/lib/extrausers/passwd links here, passwd in
 * /etc/nsswitch.conf lists extrausers), so whoami, getpwuid (Python's pwd and getpass, Node's
 * os.userInfo) and `~` find the user; in an image without that link nothing reads it.
 */
export const SANDBOX_PASSWD_PATH = '/tmp/.codemode-passwd';
/** The user name of every sandbox pod's own user (USER, LOGNAME and its passwd line). */
const SANDBOX_USER_NAME = 'sandbox';

/** The user of the sandbox pod `seed` names (a run's or session's uid; random for a pool pod). */
export function sandboxUid(seed: string): number {
  return SANDBOX_UID_BASE + (createHash('sha256').update(seed).digest().readUInt32BE(0) % SANDBOX_UID_BASE);
}
/** Env var with /workspace's size limit in bytes, read inside the pod (runner and kernel). */
export const WORKSPACE_LIMIT_ENV = 'CODEMODE_WORKSPACE_LIMIT_BYTES';
/** The name of the /workspace volume in every sandbox pod. */
export const WORKSPACE_VOLUME = 'workspace';
/**
 * What each entry (file, directory, link) of a /workspace on disk counts at least against its size
 * limit, in the runner (src/exec/runner.ts) and the kernels (runtime/python/codemode_kernel/bounds.py,
 * runtime/node/bounds.js): one block of the node's disk. Empty files take no
 * blocks, so without it a loop creating them used up the node's inodes (16.7 M on the test VM,
 * ~48,000 a second from one process), which no Kubernetes limit bounds per pod.
 */
export const WORKSPACE_MIN_ENTRY_BYTES = 4096;
/**
 * Set to 1 on sandbox pods: the runner and the session kernel wait, before any code starts, until
 * the pod cannot reach the API server's Service (bounded). Some CNIs program a new pod's
 * NetworkPolicy a moment after its container started (kube-router before --netpol-default-deny:
 * up to 1.4 s measured on a quiet node, more under load); code must not start in that window.
 */
export const NETWORK_CHECK_ENV = 'CODEMODE_NETWORK_CHECK';
/**
 * Env var with the largest file a sandbox process may write, in bytes: a MiB past the larger of
 * /workspace's and /tmp's limits, for no file may legitimately be larger (fileLimitBytes). The
 * container's main process (mainCommand) and the runner set it as RLIMIT_FSIZE, a hard limit
 * that code cannot raise.
 */
export const FILE_LIMIT_ENV = 'CODEMODE_FILE_LIMIT_BYTES';
/**
 * Where the kubelet mounts the container's termination-message file. It keeps that file in the
 * pod's directory on the node's disk, writable by everyone (0666) and counted in no
 * ephemeral-storage limit: at /dev/termination-log, code wrote 600 MB to it in a second and the
 * pod was never evicted. Inside /root (0700, root's, in the sandbox image and Debian, Alpine and
 * distroless ones) the sandbox user cannot open it; in an image whose /root is open the file limit
 * (FILE_LIMIT_ENV) still bounds it. Nothing here reads termination messages.
 */
export const TERMINATION_MESSAGE_PATH = '/root/codemode-termination-log';
/** Small on purpose: scheduling should not reserve disk a run rarely uses. */
export const EPHEMERAL_STORAGE_REQUEST = '64Mi';

/** Everything the controller decides from config + run; the builder adds no policy of its own. */
export interface PodBuildOptions extends SandboxPlacement {
  image: string;
  imagePullPolicy: 'Always' | 'IfNotPresent' | 'Never';
  cpuLimit: string;
  memoryLimit: string;
  cpuRequest: string;
  memoryRequest: string;
  ephemeralStorageLimit: string;
  workspaceSizeLimit: string;
  /** Memory: /workspace is a tmpfs (see the volumes); absent or Disk: on the node's disk. */
  workspaceMedium?: WorkspaceMedium;
  tmpSizeLimit: string;
  activeDeadlineSeconds: number;
  runtimeClassName?: string;
  /**
   * The runner and the kernel start code only once the pod has no network (NETWORK_CHECK_ENV);
   * false when the administrator accepted an unenforced NetworkPolicy (CODEMODE_ACCEPT_UNENFORCED).
   */
  networkCheck?: boolean;
  /** The SandboxProfile the pod is built from (LABEL_PROFILE). */
  profile?: string;
}

/** Where a profile's pods may run (SandboxProfile spec.nodeSelector and spec.tolerations). */
export interface SandboxPlacement {
  nodeSelector?: Record<string, string>;
  tolerations?: readonly Toleration[];
}

/** The pod spec fields of a placement: copies, so a built pod never shares them with the profile. */
export function placementSpec(p: SandboxPlacement | undefined): Pick<V1PodSpec, 'nodeSelector' | 'tolerations'> {
  return {
    ...(p?.nodeSelector !== undefined && { nodeSelector: { ...p.nodeSelector } }),
    ...(p?.tolerations !== undefined && { tolerations: p.tolerations.map((t) => ({ ...t })) }),
  };
}

/** The administrator's settings every sandbox pod is built from (a Pick of Config, and a profile's placement). */
export interface SandboxPodSettings extends SandboxPlacement {
  imagePullPolicy: PodBuildOptions['imagePullPolicy'];
  defaultCpu: string;
  defaultMemory: string;
  cpuRequest: string;
  memoryRequest: string;
  ephemeralStorageLimit: string;
  workspaceSizeLimit: string;
  workspaceMedium?: WorkspaceMedium;
  tmpSizeLimit: string;
  runtimeClassName?: string;
  acceptUnenforced?: readonly string[];
}

/**
 * Pure: the build options of a sandbox pod from the settings, for every kind of sandbox pod (run,
 * session, pool, canary). Limits default to the administrator's; requests are capped at the limits
 * by the builder (atMost).
 */
export function sandboxPodOptions(
  c: SandboxPodSettings,
  o: { image: string; activeDeadlineSeconds: number; cpuLimit?: string; memoryLimit?: string; profile?: string },
): PodBuildOptions {
  return {
    image: o.image,
    imagePullPolicy: c.imagePullPolicy,
    cpuLimit: o.cpuLimit ?? c.defaultCpu,
    memoryLimit: o.memoryLimit ?? c.defaultMemory,
    cpuRequest: c.cpuRequest,
    memoryRequest: c.memoryRequest,
    ephemeralStorageLimit: c.ephemeralStorageLimit,
    workspaceSizeLimit: c.workspaceSizeLimit,
    // Only Memory is written: a Disk pod stays the object it was before the setting existed (same template hash).
    ...(c.workspaceMedium === 'Memory' && { workspaceMedium: 'Memory' as const }),
    tmpSizeLimit: c.tmpSizeLimit,
    activeDeadlineSeconds: o.activeDeadlineSeconds,
    ...(c.runtimeClassName !== undefined && { runtimeClassName: c.runtimeClassName }),
    ...(c.nodeSelector !== undefined && { nodeSelector: c.nodeSelector }),
    ...(c.tolerations !== undefined && { tolerations: c.tolerations }),
    networkCheck: !(c.acceptUnenforced ?? []).includes('network'),
    ...(o.profile !== undefined && { profile: o.profile }),
  };
}

// A request above its limit makes the API server reject the pod; cap it instead so a small
// per-run limit (e.g. memory 64Mi with the default 128Mi request) still works.
function atMost(request: string, limit: string): string {
  return parseQuantity(request) > parseQuantity(limit) ? limit : request;
}

/** The container hardening of every sandbox pod, as `uid` (and of the package fetcher, src/packages). */
export function containerSecurityContext(uid = SANDBOX_UID): V1SecurityContext {
  return {
    readOnlyRootFilesystem: true,
    allowPrivilegeEscalation: false,
    privileged: false,
    capabilities: { drop: ['ALL'] },
    runAsNonRoot: true,
    runAsUser: uid,
    runAsGroup: SANDBOX_UID,
    seccompProfile: { type: 'RuntimeDefault' },
  };
}

/** The pod-level hardening of every sandbox pod, as `uid` (and of the package fetcher, src/packages). */
export function podSecurityContext(uid = SANDBOX_UID): V1PodSecurityContext {
  return {
    runAsUser: uid,
    runAsGroup: SANDBOX_UID,
    // Makes the emptyDir volumes writable by the non-root user.
    fsGroup: SANDBOX_UID,
    runAsNonRoot: true,
    seccompProfile: { type: 'RuntimeDefault' },
  };
}

/** Keeps a run pod alive; each piece of code is started later with exec. */
const IDLE_COMMAND = ['sleep', 'infinity'];

/**
 * Where a sandbox container's stdout and stderr go (the kernel's log lines, an interpreter's last
 * words): a file in the pod's /tmp, not the container log. The container log is written by the
 * container runtime to the node's disk, with CPU outside the pod's limits, and any process holding
 * it (code in a session kernel's own process finds the kernel's log descriptor) wrote ~200 MB/s
 * there until the kubelet evicted the pod ~10 s later; this file is bounded by /tmp's size (memory
 * the pod's limit holds) and the file limit. Read it with `kubectl exec <pod> -- cat <path>`.
 */
export const SANDBOX_LOG_PATH = '/tmp/.codemode/kernel.log';

/**
 * `ulimit -c 0` (soft and hard: code cannot raise it), in the container's command and the runner:
 * no core dumps. A crash's dump goes where the node's core_pattern says; where that is a program
 * (systemd-coredump, apport, common on cloud nodes) it runs as root on the node, outside the pod's
 * CPU, memory and disk limits, and keeps the sandbox's memory on the node's disk. Those programs
 * store nothing for a process whose limit is 0; a file pattern writes nothing at all.
 */
export const CORE_LIMIT = 'ulimit -c 0';

/**
 * The container's command: `command` under the file limit (FILE_LIMIT_ENV) and the core limit
 * (CORE_LIMIT) it and every process it starts keep, with its stdout and stderr appended to
 * `output` (SANDBOX_LOG_PATH; /dev/null for the runner pod's idle `sleep`, which any process of
 * the pod's user could otherwise write through /proc/<pid>/fd/1), after writing its user's passwd
 * line (SANDBOX_PASSWD_PATH). The user and group are read from /proc/self/status, not written into
 * the command: a pool pod's spec, user aside, must be the same for every pod of one template
 * (podTemplateHash). Shell builtins only (no process started), and a /tmp that cannot take the
 * line stops nothing. Only the wrapper's own refusal reaches the container log.
 */
export function mainCommand(command: readonly string[], output: string, passwdPath = SANDBOX_PASSWD_PATH): string[] {
  const dir = output.slice(0, output.lastIndexOf('/'));
  const open = output === '/dev/null' ? '' : `mkdir -p -m 700 '${dir}' && `;
  const passwd =
    `u=; g=; while read -r k v _; do case "$k" in Uid:) u="$v";; Gid:) g="$v"; break;; esac; done </proc/self/status; ` +
    `[ -n "$u" ] && printf '${SANDBOX_USER_NAME}:x:%s:%s:${SANDBOX_USER_NAME}:${WORKSPACE_DIR}:/bin/sh\\n' "$u" "$g" 2>/dev/null >'${passwdPath}'; `;
  return [
    '/bin/sh',
    '-c',
    `${passwd}l="$${FILE_LIMIT_ENV}"; case "$l" in ''|*[!0-9]*) l=;; esac; [ -n "$l" ] && ulimit -f "$((l / 512))" || { echo "codemode: cannot set the file size limit (ulimit -f)" >&2; exit 125; }; ${CORE_LIMIT} || exit 125; ${open}exec "$@" >>'${output}' 2>&1`,
    'codemode-main',
    ...command,
  ];
}

/**
 * The largest file a sandbox process may write (FILE_LIMIT_ENV): a MiB past the larger of the
 * /workspace and /tmp limits, so that a program filling /workspace still passes its limit and
 * ends DiskFull, as the runner and the kernel report it (at exactly the limit it ended with a
 * write error of its own, and the workspace was not over).
 */
export function fileLimitBytes(opts: Pick<PodBuildOptions, 'workspaceSizeLimit' | 'tmpSizeLimit'>): number {
  return Math.floor(Math.max(parseQuantity(opts.workspaceSizeLimit), parseQuantity(opts.tmpSizeLimit))) + FILE_LIMIT_SLACK_BYTES;
}

const FILE_LIMIT_SLACK_BYTES = 1024 * 1024;

function sandboxContainer(opts: PodBuildOptions, uid: number, command: string[], extraMounts: V1VolumeMount[]): V1Container {
  return {
    name: SANDBOX_CONTAINER,
    image: opts.image,
    imagePullPolicy: opts.imagePullPolicy,
    command: mainCommand(command, command === IDLE_COMMAND ? '/dev/null' : SANDBOX_LOG_PATH),
    workingDir: WORKSPACE_DIR,
    terminationMessagePath: TERMINATION_MESSAGE_PATH,
    env: [
      { name: 'HOME', value: WORKSPACE_DIR },
      // The pod's user is in no image's /etc/passwd (SANDBOX_PASSWD_PATH): getpass.getuser() and the like read these first.
      { name: 'USER', value: SANDBOX_USER_NAME },
      { name: 'LOGNAME', value: SANDBOX_USER_NAME },
      { name: 'TMPDIR', value: TMP_DIR },
      { name: 'PYTHONUNBUFFERED', value: '1' },
      { name: 'PYTHONDONTWRITEBYTECODE', value: '1' },
      // The runner and the kernel stop a program whose /workspace grows past this (see volumes);
      // 0 for a tmpfs, whose size is itself the limit (nothing to walk).
      { name: WORKSPACE_LIMIT_ENV, value: opts.workspaceMedium === 'Memory' ? '0' : String(parseQuantity(opts.workspaceSizeLimit)) },
      { name: FILE_LIMIT_ENV, value: String(fileLimitBytes(opts)) },
      ...(opts.networkCheck === false ? [] : [{ name: NETWORK_CHECK_ENV, value: '1' }]),
    ],
    securityContext: containerSecurityContext(uid),
    resources: {
      requests: {
        cpu: atMost(opts.cpuRequest, opts.cpuLimit),
        memory: atMost(opts.memoryRequest, opts.memoryLimit),
        'ephemeral-storage': atMost(EPHEMERAL_STORAGE_REQUEST, opts.ephemeralStorageLimit),
      },
      limits: {
        cpu: opts.cpuLimit,
        memory: opts.memoryLimit,
        'ephemeral-storage': opts.ephemeralStorageLimit,
      },
    },
    volumeMounts: [{ name: WORKSPACE_VOLUME, mountPath: WORKSPACE_DIR }, { name: 'tmp', mountPath: TMP_DIR }, ...extraMounts],
  };
}

interface SandboxPodParts {
  name?: string;
  generateName?: string;
  namespace: string | undefined;
  labels: Record<string, string>;
  owner?: V1OwnerReference;
  command: string[];
  /** The pod's own user (sandboxUid). */
  uid: number;
  activeDeadlineSeconds?: number;
  extraVolumes?: V1Volume[];
  extraMounts?: V1VolumeMount[];
}

// Every sandbox pod, run or session, is built here: one place for the hardening.
function sandboxPod(parts: SandboxPodParts, opts: PodBuildOptions): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      ...(parts.name !== undefined && { name: parts.name }),
      ...(parts.generateName !== undefined && { generateName: parts.generateName }),
      namespace: parts.namespace,
      labels: {
        [LABEL_MANAGED_BY]: MANAGED_BY_VALUE,
        // The deny-all NetworkPolicy selects this label: it must be on every sandbox pod.
        [LABEL_SANDBOX]: SANDBOX_LABEL_VALUE,
        ...(opts.profile !== undefined && { [LABEL_PROFILE]: opts.profile }),
        ...parts.labels,
      },
      ...(parts.owner !== undefined && { ownerReferences: [parts.owner] }),
    },
    spec: {
      restartPolicy: 'Never',
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      // The pause container becomes PID 1 and reaps orphans: a process killed at the timeout
      // whose parent already died must not stay behind as a zombie of `sleep`.
      shareProcessNamespace: true,
      hostNetwork: false,
      hostPID: false,
      hostIPC: false,
      // Nothing to flush: `sleep` and the run's processes can die at once.
      terminationGracePeriodSeconds: 1,
      ...(parts.activeDeadlineSeconds !== undefined && { activeDeadlineSeconds: parts.activeDeadlineSeconds }),
      ...(opts.runtimeClassName === undefined ? {} : { runtimeClassName: opts.runtimeClassName }),
      ...placementSpec(opts),
      securityContext: podSecurityContext(parts.uid),
      containers: [sandboxContainer(opts, parts.uid, parts.command, parts.extraMounts ?? [])],
      // /tmp is a tmpfs with a hard size: a write past it fails at once with ENOSPC (the run
      // reports DiskFull), where a disk-backed emptyDir's sizeLimit is enforced only by the
      // kubelet evicting the whole pod a while later. Its pages count against the container's
      // memory limit, which is why it stays small. /workspace is on disk by default (it may hold
      // more than the memory limit): its limit is checked from inside by the runner and the kernel
      // five times a second, with the kubelet's eviction as the backstop; nothing bounds its
      // inodes or its disk bandwidth there. With workspaceMedium Memory it is a tmpfs like /tmp:
      // a hard size, its files and their inodes charged to the memory limit, no disk writes.
      volumes: [
        {
          name: WORKSPACE_VOLUME,
          emptyDir: opts.workspaceMedium === 'Memory' ? { medium: 'Memory', sizeLimit: opts.workspaceSizeLimit } : { sizeLimit: opts.workspaceSizeLimit },
        },
        { name: 'tmp', emptyDir: { medium: 'Memory', sizeLimit: opts.tmpSizeLimit } },
        ...(parts.extraVolumes ?? []),
      ],
    },
  };
}

function requireUid(kind: string, meta: { name: string; namespace?: string; uid?: string }): string {
  if (meta.uid === undefined || meta.uid === '') {
    // Without a uid the owner reference is invalid and garbage collection would never delete
    // the pod: build only from objects read back from the API server.
    throw new Error(`${kind} ${meta.namespace ?? ''}/${meta.name} has no metadata.uid; read it from the API server first`);
  }
  return meta.uid;
}

/** A kernel as a cold run pod's main process (code mode: its stream carries the code's tool calls). */
export interface RunPodKernel {
  command: string[];
  runtime: RuntimeVolume;
}

/**
 * The pod that runs `run`: idle, for the runner script, or with `kernel` running (then it is built
 * like a warm pool pod, owned by the run). Pure: same inputs, same object (the controller may diff it).
 */
export function buildRunPod(run: SandboxRun, opts: PodBuildOptions, kernel?: RunPodKernel): V1Pod {
  const { name, namespace } = run.metadata;
  const uid = requireUid(SANDBOXRUN_KIND, run.metadata);
  return sandboxPod(
    {
      name: podNameForRun(name),
      namespace,
      labels: { [LABEL_RUN]: runLabelValue(name), [LABEL_RUNTIME]: normalizeLanguage(run.spec.language) },
      owner: { apiVersion: API_VERSION, kind: SANDBOXRUN_KIND, name, uid, controller: true, blockOwnerDeletion: true },
      uid: sandboxUid(uid),
      command: kernel?.command ?? IDLE_COMMAND,
      activeDeadlineSeconds: opts.activeDeadlineSeconds,
      ...(kernel && runtimeMount(kernel.runtime)),
    },
    opts,
  );
}

function runtimeMount(runtime: RuntimeVolume): Pick<SandboxPodParts, 'extraVolumes' | 'extraMounts'> {
  return {
    extraVolumes: [{ name: 'runtime', configMap: { name: runtime.configMap, defaultMode: 0o444, items: runtime.items } }],
    extraMounts: [{ name: 'runtime', mountPath: RUNTIME_DIR, readOnly: true }],
  };
}

/**
 * The pod that hosts a session's kernel: the kernel is the container's long-lived process,
 * delivered read-only from the runtime ConfigMap so stock images work without a custom build.
 */
export function buildSessionPod(session: SandboxSession, opts: PodBuildOptions, kernelCommand: string[], runtime: RuntimeVolume): V1Pod {
  const { name, namespace } = session.metadata;
  const uid = requireUid(SANDBOXSESSION_KIND, session.metadata);
  return sandboxPod(
    {
      name: podNameForSession(name),
      namespace,
      labels: { [LABEL_SESSION]: runLabelValue(name), [LABEL_RUNTIME]: kernelLanguage(session.spec.language) },
      owner: { apiVersion: API_VERSION, kind: SANDBOXSESSION_KIND, name, uid, controller: true, blockOwnerDeletion: true },
      uid: sandboxUid(uid),
      command: kernelCommand,
      activeDeadlineSeconds: opts.activeDeadlineSeconds,
      ...runtimeMount(runtime),
    },
    opts,
  );
}

/** Label on warm-pool pods: `warm` while waiting, `claimed` once a run or session took it. */
/** The interpreter warm pool pods start: they serve runs of any runtime, and python sessions. */
export const POOL_LANGUAGE: KernelLanguage = 'python';

export const LABEL_POOL = 'codemode.dev/pool';
/** Label on warm-pool pods: the hash of the template they were built from (podTemplateHash). */
export const LABEL_POOL_HASH = 'codemode.dev/pool-hash';

/**
 * A pre-started pod of the warm pool: a session kernel already running, no owner yet, and a
 * deadline long enough for the pool's lifetime plus the longest claim (a claim can only lower
 * it). A claim sets the owner, the labels and the claim's deadline with one
 * optimistic-concurrency patch. The pod carries the hash of its own template, so a pod built
 * with other settings or other kernels is recognised as stale and never served.
 */
export function buildPoolPod(
  namespace: string,
  language: KernelLanguage,
  opts: PodBuildOptions,
  kernelCommand: string[],
  runtime: RuntimeVolume,
  owner?: V1OwnerReference,
): V1Pod {
  // The built-in profile's pods keep their old names; another profile's carry its name.
  const kind = opts.profile === undefined || opts.profile === BUILTIN_PROFILE ? language : opts.profile;
  const pod = sandboxPod(
    {
      generateName: `codemode-pool-${kind}-`,
      namespace,
      labels: { [LABEL_POOL]: 'warm', [LABEL_RUNTIME]: language },
      ...(owner && { owner }),
      // Its own (no part of its shape: podTemplateHash leaves the user out).
      uid: sandboxUid(randomUUID()),
      command: kernelCommand,
      activeDeadlineSeconds: opts.activeDeadlineSeconds,
      ...runtimeMount(runtime),
    },
    opts,
  );
  const labels = { ...pod.metadata?.labels, [LABEL_POOL_HASH]: podTemplateHash(pod) };
  return { ...pod, metadata: { ...pod.metadata, labels } };
}

/** Label on the operator's self-check pods: `canary` (a sandbox) or `echo` (its counterpart). */
export const LABEL_SELFCHECK = 'codemode.dev/selfcheck';

/**
 * The canary: a sandbox pod exactly like a run's (same builder, same hardening, the label the
 * deny-all NetworkPolicy selects), with no owner, that only sleeps; the check program arrives
 * later on an exec's stdin, as code does. Its deadline stops a canary a crashed operator left.
 */
export function buildCanaryPod(namespace: string, opts: PodBuildOptions): V1Pod {
  return sandboxPod(
    {
      generateName: 'codemode-canary-',
      namespace,
      labels: { [LABEL_SELFCHECK]: 'canary', [LABEL_RUNTIME]: 'python' },
      uid: sandboxUid(randomUUID()),
      command: IDLE_COMMAND,
      activeDeadlineSeconds: opts.activeDeadlineSeconds,
    },
    opts,
  );
}

/** The same container hardening, for pods that are deliberately not sandboxes (the echo pod). */
export function hardenedSecurityContext(): V1SecurityContext {
  return containerSecurityContext();
}
