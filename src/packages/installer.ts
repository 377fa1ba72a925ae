// Installs packages into a live session without the sandbox ever going online: checks the request
// against the profile's policy, starts a fetcher pod (fetcher.ts) that alone reaches the index,
// has it resolve (pip's report / npm's lockfile), checks every resolved package — dependencies
// included — against the policy, has it download exactly that pinned set (hashes checked) and
// unpack it offline, then copies the archive into the session over the exec stream in bounded
// chunks (the gateway never holds more than one) and unpacks it there: PyPI packages into
// /workspace/.packages/python (on the session's sys.path, runtime/python), npm packages into
// /workspace/node_modules (where require() in the session looks). The fetcher pod is deleted
// afterwards, whatever happened, and so is a partial archive in the session. Used by
// create_session (spec.packages, by the controller before the session is Ready) and by
// install_packages.
import { readFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { setHeaderOptions } from '@kubernetes/client-node/dist/middleware.js';
import { PatchStrategy } from '@kubernetes/client-node/dist/patch.js';
import type { V1OwnerReference } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { CONTROLLER_FIELD_MANAGER, type Ecosystem, type KernelLanguage } from '../api/v1alpha1/index.js';
import type { Config } from '../config/index.js';
import { execRaw, type RawExecResult } from '../exec/exec.js';
import { apiErrorMessage, isNotFound, type KubeClients } from '../kube/clients.js';
import { SANDBOX_CONTAINER, type SandboxPlacement } from '../sandbox/pod.js';
import { FETCHER_CONTAINER, FETCHER_NETWORK_POLICY_NAME, buildFetcherNetworkPolicy, buildFetcherPod, type FetcherOptions } from './fetcher.js';
import {
  PackageError,
  checkRequested,
  checkResolved,
  ecosystemOf,
  packagePolicy,
  parseFetchSummary,
  parseNpmLock,
  parsePipReport,
  type PackagePolicy,
  type ResolvedPackage,
} from './policy.js';
import { FETCHER_SCRIPT, SESSION_SCRIPT } from './scripts.js';
import { InstallSlots, InstallSlotsFull, installSlotKey } from './slots.js';
import { cutUnits } from '../util/text.js';
import type { PackagePolicySpec } from '../api/v1alpha1/index.js';

export type InstallerOptions = FetcherOptions &
  Pick<
    Config,
    | 'packagesEcosystems'
    | 'packagesAllow'
    | 'packagesDeny'
    | 'packagesMaxPackageBytes'
    | 'packagesMaxTotalBytes'
    | 'packagesPypiIndexUrl'
    | 'packagesNpmRegistry'
    | 'packagesCaFile'
  >;

/**
 * pip and npm for the fetcher, fetched from the configured index by the fetcher itself (the images
 * carry neither) and checked against these hashes. pip 26.3 needs Python ≥ 3.10; npm 10.9 runs on
 * Node ≥ 18.17 (the sandbox image's Debian nodejs is 18.19).
 */
export const PIP_TOOL = { file: 'pip-26.3-py3-none-any.whl', digest: 'f3b60b20ffaadd4415ed7957212a38ac63fa4c5fa375bd0f4a797777940fad13' };
export const NPM_TOOL = {
  file: 'npm-10.9.9.tgz',
  digest: 'sha512-1g+6jLQvaIuB4zwvHL7yrXuXcWZwDsCtBX8bbWDqbvJSSr9nPiDDWTHNgwXR27iIcTTW7v3A57hDW9RYv2W4Yg==',
};

/** Bytes per exec when copying the archive: the gateway holds at most one chunk at a time. */
const CHUNK_BYTES = 4 * 1024 * 1024;
const MAX_CA_BYTES = 4 * 1024 * 1024;
/** For removing a partial archive after a failed delivery: one short exec, run after the install's deadline too. */
const DISCARD_TIMEOUT_MS = 10_000;
/**
 * The most the fetcher's `resolve` may print: only the fields the gateway reads (scripts.ts), at
 * most ~4.5 KB per package for 300 packages. The gateway parses it in memory: 8 MiB of hostile
 * JSON cost ~0.8 s and ~180 MB of heap per install, this a quarter of that.
 */
export const MAX_RESOLVE_BYTES = 2 * 1024 * 1024;
export const PYTHON_PACKAGES_DIR = '/workspace/.packages/python';
const NODE_PACKAGES_PARENT = '/workspace';

export interface InstallTarget {
  namespace: string;
  /** The session's pod (its kernel is running). */
  pod: string;
  language: KernelLanguage;
  /** The session's image for that language (the fetcher runs the same). */
  image: string;
  runtimeClassName?: string;
  /** The profile's placement (nodeSelector, tolerations) for the fetcher pod. */
  placement?: SandboxPlacement;
  /** The session, as owner of the fetcher pod. */
  owner: V1OwnerReference;
  /** Label value naming the session. */
  sessionLabel: string;
  /**
   * The session's owner (spec.owner.user): one user holds at most MAX_INSTALLS_PER_USER slots; a
   * session without an owner holds them as if it were its own user (installSlotKey).
   */
  user?: string;
  /** The profile's policy as its SandboxProfile says it (the gateway's settings fill in the rest). */
  policy?: PackagePolicySpec;
}

export interface InstallResult {
  ecosystem: Ecosystem;
  /** What was installed, dependencies included (empty: all of it was there already). */
  installed: ResolvedPackage[];
  /** Bytes copied into the session. */
  bytes: number;
}

export type InstallOutcome = 'installed' | 'refused' | 'failed';

const SSA = setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply);

export class PackageInstaller {
  private ca: Buffer | undefined;
  private readonly slots = new InstallSlots();

  constructor(
    private readonly clients: KubeClients,
    private readonly opts: InstallerOptions,
    private readonly log: Logger,
    /** Told of every install that got past the request check (codemode_package_installs_total). */
    private readonly onInstall?: (ecosystem: Ecosystem, outcome: InstallOutcome, seconds: number) => void,
  ) {}

  async install(t: InstallTarget, requested: readonly string[]): Promise<InstallResult> {
    const policy = packagePolicy(t.policy, this.opts);
    const eco = ecosystemOf(t.language);
    const reqs = checkRequested(policy, eco, t.language, requested);
    const slot = this.slots.take(installSlotKey(t));
    if (slot instanceof InstallSlotsFull) throw slot;
    const started = performance.now();
    let outcome: InstallOutcome = 'failed';
    try {
      const r = await this.installChecked(t, reqs, policy, eco as Ecosystem);
      outcome = 'installed';
      return r;
    } catch (err) {
      if (err instanceof PackageError && err.kind === 'refused') outcome = 'refused';
      throw err;
    } finally {
      slot.release();
      this.onInstall?.(eco as Ecosystem, outcome, (performance.now() - started) / 1000);
    }
  }

  private async installChecked(t: InstallTarget, reqs: string[], policy: PackagePolicy, ecosystem: Ecosystem): Promise<InstallResult> {
    const deadline = Date.now() + this.opts.packagesTimeoutSeconds * 1000;
    const ca = await this.caBundle();
    await this.ensurePolicy(t.namespace);
    const pod = await this.startFetcher(t, policy.maxTotalBytes);
    try {
      await this.waitRunning(t.namespace, pod, deadline);
      const index = ecosystem === 'pypi' ? this.opts.packagesPypiIndexUrl : this.opts.packagesNpmRegistry;
      const tool = ecosystem === 'pypi' ? PIP_TOOL : NPM_TOOL;
      await this.fetcher(t.namespace, pod, ['prepare', ecosystem, tool.file, tool.digest], withIndex(index, ca), 1024, deadline);
      const report = await this.fetcher(t.namespace, pod, ['resolve', ecosystem, ...reqs], withIndex(index), MAX_RESOLVE_BYTES, deadline);
      const resolved = ecosystem === 'pypi' ? parsePipReport(report.toString('utf8')) : parseNpmLock(report.toString('utf8'), index);
      checkResolved(policy, ecosystem, resolved);
      if (resolved.length === 0) return { ecosystem, installed: [], bytes: 0 };
      const pins = Buffer.from(JSON.stringify(resolved));
      const summaryText = await this.fetcher(
        t.namespace,
        pod,
        ['fetch', ecosystem, String(policy.maxPackageBytes), String(policy.maxTotalBytes)],
        withIndex(index, pins),
        1024 * 1024,
        deadline,
      );
      const summary = parseFetchSummary(summaryText.toString('utf8'), policy);
      await this.deliver(t, pod, summary.archiveBytes, summary.sha256, ecosystem, deadline);
      return { ecosystem, installed: resolved, bytes: summary.archiveBytes };
    } finally {
      this.clients.core.deleteNamespacedPod({ namespace: t.namespace, name: pod, gracePeriodSeconds: 0 }).catch((err: unknown) => {
        if (!isNotFound(err)) this.log.warn({ pod, err: apiErrorMessage(err) }, 'Failed to delete package fetcher Pod (its deadline ends it)');
      });
    }
  }

  private async caBundle(): Promise<Buffer> {
    if (this.ca) return this.ca;
    try {
      const b = await readFile(this.opts.packagesCaFile);
      if (b.length > MAX_CA_BYTES) throw new Error(`larger than ${MAX_CA_BYTES} bytes`);
      this.ca = b;
      return b;
    } catch (err) {
      throw new PackageError(
        `Packages cannot be fetched: the gateway cannot read its CA bundle ${this.opts.packagesCaFile} (${(err as Error).message}).`,
        'Ask the administrator to set CODEMODE_PACKAGES_CA_FILE.',
        'failed',
      );
    }
  }

  /** Server-side apply: idempotent, and a changed setting (egress ranges) reaches the namespace's policy. */
  private async ensurePolicy(namespace: string): Promise<void> {
    const body = buildFetcherNetworkPolicy(namespace, this.opts);
    await this.clients.networking.patchNamespacedNetworkPolicy(
      { name: FETCHER_NETWORK_POLICY_NAME, namespace, body, fieldManager: CONTROLLER_FIELD_MANAGER, force: true },
      SSA,
    );
  }

  private async startFetcher(t: InstallTarget, maxTotalBytes: number): Promise<string> {
    const body = buildFetcherPod(
      {
        namespace: t.namespace,
        image: t.image,
        owner: t.owner,
        session: t.sessionLabel,
        maxTotalBytes,
        ...(t.runtimeClassName !== undefined && { runtimeClassName: t.runtimeClassName }),
        ...(t.placement !== undefined && { placement: t.placement }),
      },
      this.opts,
    );
    const pod = await this.clients.core.createNamespacedPod({ namespace: t.namespace, body });
    return pod.metadata?.name ?? '';
  }

  private async waitRunning(namespace: string, name: string, deadline: number): Promise<void> {
    for (let wait = 50; Date.now() < deadline; wait = Math.min(wait * 2, 500)) {
      const pod = await this.clients.core.readNamespacedPod({ namespace, name });
      const phase = pod.status?.phase;
      if (phase === 'Running' && pod.status?.containerStatuses?.[0]?.ready) return;
      const waiting = pod.status?.containerStatuses?.[0]?.state?.waiting;
      if (
        phase === 'Failed' ||
        phase === 'Succeeded' ||
        (waiting?.reason && /ErrImagePull|ImagePullBackOff|InvalidImageName|CreateContainerError/.test(waiting.reason))
      )
        throw new PackageError(
          `The package fetcher pod could not start (${waiting?.reason ?? phase}${waiting?.message ? `: ${waiting.message.slice(0, 200)}` : ''}).`,
          'Ask the administrator to check the profile image.',
          'failed',
        );
      await new Promise((r) => setTimeout(r, wait));
    }
    throw new PackageError('The package fetcher pod did not start in time.', 'Try again later; the cluster may be short of capacity.', 'failed');
  }

  /** One step of the fetcher script; its stdout, or a PackageError with the script's own sentence. */
  private async fetcher(namespace: string, pod: string, args: string[], stdin: Buffer | undefined, maxOut: number, deadline: number): Promise<Buffer> {
    const r = await execRaw(
      this.clients.exec,
      namespace,
      pod,
      FETCHER_CONTAINER,
      ['python3', '-I', '-c', FETCHER_SCRIPT, ...args],
      stdin,
      maxOut,
      remaining(deadline),
    );
    if (r.exitCode === 0 && !r.overflow) return r.stdout;
    throw stepError(args[0] ?? '', r);
  }

  /**
   * Copies the archive in and unpacks it. Whatever fails on the way (the deadline between chunks, a
   * chunk, the unpacking), the partial archive is removed from the session before the error goes
   * on: /workspace has a size limit, and each failed attempt would otherwise keep up to
   * maxTotalBytes of it for the rest of the session. A gateway that dies mid-way leaves its archive
   * to the next install's first `append`, which removes archives older than the install timeout.
   */
  private async deliver(t: InstallTarget, fetcherPod: string, size: number, sha256: string, eco: Ecosystem, deadline: number): Promise<void> {
    const archive = `/workspace/.packages/.incoming-${randomBytes(6).toString('hex')}.tgz`;
    try {
      for (let offset = 0; offset < size;) {
        const chunk = await this.fetcher(
          t.namespace,
          fetcherPod,
          ['read', String(offset), String(Math.min(CHUNK_BYTES, size - offset))],
          undefined,
          CHUNK_BYTES,
          deadline,
        );
        if (chunk.length === 0) throw new PackageError('The package archive ended early.', 'Try again.', 'failed');
        await this.session(t, ['append', archive, String(offset), String(this.opts.packagesTimeoutSeconds)], chunk, remaining(deadline));
        offset += chunk.length;
      }
      await this.session(t, ['extract', archive, eco === 'pypi' ? PYTHON_PACKAGES_DIR : NODE_PACKAGES_PARENT, sha256], undefined, remaining(deadline));
    } catch (err) {
      await this.discard(t, archive);
      throw err;
    }
  }

  /**
   * Best effort, with its own time (the install's may be over): removes a partial archive from the
   * session. A failure is only logged — the install's own error is what the caller needs — and
   * without the session's stderr, which sandbox code can shape.
   */
  private async discard(t: InstallTarget, archive: string): Promise<void> {
    const r = await this.sessionExec(t, ['discard', archive], undefined, DISCARD_TIMEOUT_MS).catch((): undefined => undefined);
    if (r?.exitCode !== 0)
      this.log.warn(
        { sandboxsession: t.owner.name, exitCode: r?.exitCode, answered: r !== undefined && r.error === undefined },
        'Failed to remove a partial package archive from the session (the next install removes it once it is old)',
      );
  }

  private async session(t: InstallTarget, args: string[], stdin: Buffer | undefined, timeoutMs: number): Promise<void> {
    const r = await this.sessionExec(t, args, stdin, timeoutMs);
    if (r.exitCode !== 0) {
      const why = cutUnits(r.stderr.trim(), 300) || r.error || `exit code ${String(r.exitCode)}`;
      throw new PackageError(
        `The packages could not be copied into the session: ${why}.`,
        'Check the session is alive and its /workspace has room, then try again.',
        'failed',
      );
    }
  }

  private sessionExec(t: InstallTarget, args: string[], stdin: Buffer | undefined, timeoutMs: number): Promise<RawExecResult> {
    return execRaw(this.clients.exec, t.namespace, t.pod, SANDBOX_CONTAINER, ['python3', '-I', '-S', '-c', SESSION_SCRIPT, ...args], stdin, 64, timeoutMs);
  }
}

/**
 * A fetcher step's stdin: the index URL on its first line (config holds it to an http(s) URL without
 * whitespace), then the step's own input. Not an argument: an exec's arguments are in its request's
 * URL, which the API server's audit log keeps, and a private index's URL holds its credentials.
 */
export function withIndex(index: string, rest?: Buffer): Buffer {
  return Buffer.concat([Buffer.from(`${index}\n`), rest ?? Buffer.alloc(0)]);
}

function remaining(deadline: number): number {
  const left = deadline - Date.now();
  if (left <= 0)
    throw new PackageError(
      'The install took longer than the time allowed.',
      'Install fewer packages at a time, or ask the administrator (CODEMODE_PACKAGES_TIMEOUT_SECONDS).',
      'failed',
    );
  return left;
}

/** The fetcher's exit codes: 5 is a limit (refused), anything else a failure; its stderr says which package and why. */
export function stepError(step: string, r: Pick<RawExecResult, 'exitCode' | 'stderr' | 'error' | 'overflow'>): PackageError {
  if (r.overflow) return new PackageError(`The fetcher's answer to ${step} was too large.`, 'Install fewer packages at a time.', 'refused');
  const why = lastLines(r.stderr) || r.error || `exit code ${String(r.exitCode)}`;
  const what = step === 'resolve' ? 'could not be resolved' : step === 'prepare' ? 'cannot be fetched' : 'could not be downloaded';
  return new PackageError(
    `The packages ${what}: ${why}`,
    r.exitCode === 5 ? 'Install fewer or smaller packages.' : 'Check the names and versions, then try again.',
    r.exitCode === 5 ? 'refused' : 'failed',
  );
}

/** pip and npm put the sentence that matters last; keep the last few lines, bounded. */
function lastLines(text: string): string {
  const lines = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !/^npm (notice|warn)/.test(l));
  return lines.slice(-4).join(' ').slice(-600);
}
