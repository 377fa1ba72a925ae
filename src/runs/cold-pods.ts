// A cold run's own pod: built for the run (deterministic name, the run its controlling owner),
// created, adopted when it exists already and is the run's, started with this version's kernel
// when the run's image is python's, and waited for until ready. It is deleted once the run's
// outcome is stored: single use, and the marker that the code started (src/controller/run-decision.ts).
import type { Logger } from 'pino';
import { Reasons, normalizeLanguage, type Reason, type SandboxRun } from '../api/v1alpha1/index.js';
import type { Config } from '../config/index.js';
import { NOT_ISOLATED_AT_START_MESSAGE } from '../exec/frames.js';
import { kernelCommand } from '../exec/kernel.js';
import { isQuotaConflict } from '../kube/api-client.js';
import { apiErrorMessage, isNotFound, statusOf, type KubeClients } from '../kube/clients.js';
import { quotaExceeded } from '../limits/run-slots.js';
import { podNameForRun } from '../sandbox/names.js';
import { POOL_LANGUAGE, buildRunPod, sandboxPodOptions, type RunPodKernel, type SandboxPodSettings } from '../sandbox/pod.js';
import { kernelRefusedNetwork } from '../sandbox/pod-failure.js';
import type { PodWatcher } from '../sandbox/pod-watcher.js';
import type { RuntimeVolume } from '../sandbox/runtime-configmap.js';
import type { RunMetricsSink } from './types.js';
import { runPodSeconds } from '../sandbox/deadlines.js';

/** This version's kernels (src/controller/runtime-guard.ts): their ConfigMap, present before a pod mounts it. */
export interface KernelRuntime {
  readonly volume: RuntimeVolume;
  ensure(namespace: string): Promise<void>;
}

/** The settings a cold pod is built from (the run's profile applied). */
export type ColdPodOptions = SandboxPodSettings & Pick<Config, 'images' | 'podStartupTimeoutSeconds'>;

/** A ready pod and the kernel it started with (none: the runner script runs the code), or why there is none. */
export type ColdStart = { podName: string; kernel?: RunPodKernel } | { failure: { reason: Reason; message: string } };

export interface ColdPodDeps {
  clients: Pick<KubeClients, 'core'>;
  pods: Pick<PodWatcher, 'waitReady' | 'get'>;
  metrics?: Pick<RunMetricsSink, 'podStarted'>;
  /**
   * A pod started with a kernel: its kernel stream, opened as soon as its container started
   * (before the pod is Ready: src/sandbox/container-started.ts), so the relay's exec and start
   * overlap the kubelet's status update and the NetworkPolicy's enforcement; dropped again when
   * the pod did not become ready. Only a ping goes over it before the run's own frame.
   */
  kernelStream?: {
    openWhenStarted(namespace: string, pod: string, until: Promise<unknown>): void;
    drop(namespace: string, pod: string): void;
  };
}

export class ColdPods {
  private kernelRuntime: KernelRuntime | undefined;

  constructor(private readonly d: ColdPodDeps) {}

  /** With this version's kernels, cold pods start with one (kernelFor). */
  setKernelRuntime(runtime: KernelRuntime | undefined): void {
    this.kernelRuntime = runtime;
  }

  /**
   * Creates the run's pod and waits until it is ready. `created` is told its name once it exists
   * (the NetworkPolicy guard's record of pods created after the policy was in place). A pod that
   * did not start is deleted, and the failure says why.
   */
  async start(run: SandboxRun, ns: string, opts: ColdPodOptions, profile: string, log: Logger, created: (podName: string) => void): Promise<ColdStart> {
    const podName = podNameForRun(run.metadata.name);
    const creating = performance.now();
    const kernel = await this.kernelFor(run, ns, opts);
    const pod = await this.create(run, ns, podName, log, opts, profile, kernel);
    if (pod) return { failure: pod };
    created(podName);
    const ready = this.d.pods.waitReady(ns, podName, opts.podStartupTimeoutSeconds * 1000);
    if (kernel) this.d.kernelStream?.openWhenStarted(ns, podName, ready);
    const state = await ready;
    if (state.kind === 'ready') {
      this.d.metrics?.podStarted?.('cold', (performance.now() - creating) / 1000);
      return { podName, ...(kernel && { kernel }) };
    }
    if (kernel) this.d.kernelStream?.drop(ns, podName);
    // No code was sent to this single-use pod yet: a kernel that ended with the network exit code
    // refused to start because the pod could reach the network (kernelRefusedNetwork).
    if (kernel && state.kind === 'failed' && kernelRefusedNetwork(this.d.pods.get(ns, podName))) {
      this.delete(ns, podName, log);
      const hint = "Run it again; if this repeats, ask the administrator to check that the cluster's network plugin enforces NetworkPolicy.";
      return { failure: { reason: Reasons.SandboxNotEnforced, message: `The code was not run: ${NOT_ISOLATED_AT_START_MESSAGE}. ${hint}` } };
    }
    const unsched = state.kind === 'pending' && state.message.startsWith('Unschedulable');
    const reason = state.kind === 'failed' ? state.reason : unsched ? Reasons.Unschedulable : Reasons.PodFailed;
    const message =
      state.kind === 'failed'
        ? state.message
        : `The sandbox pod did not start within ${opts.podStartupTimeoutSeconds}s (${state.message}). Try again later or ask the administrator to check the cluster's capacity.`;
    this.delete(ns, podName, log);
    return { failure: { reason, message } };
  }

  /** Deletes a run's pod in the background (grace 0: its processes ended with the program). */
  delete(namespace: string, name: string, log: Logger): void {
    this.d.clients.core.deleteNamespacedPod({ namespace, name, gracePeriodSeconds: 0 }).catch((err: unknown) => {
      if (!isNotFound(err)) log.warn({ pod: name, err: apiErrorMessage(err) }, 'Failed to delete Pod');
    });
  }

  /**
   * The kernel a cold pod starts with, as a warm pod's: one way to run a transient program, so a
   * cold run gets what a warm one gets — code-mode tool calls over the kernel's stream, figures
   * and display() — at the same cost (measured: 1001 vs 1010 ms median, and two fewer API writes
   * before the reply, since the kernel's network check ends before the pod is exec'd). Undefined
   * (the runner script) when this version has no kernels or the run's image is not python's.
   */
  private async kernelFor(run: SandboxRun, ns: string, opts: ColdPodOptions): Promise<RunPodKernel | undefined> {
    const runtime = this.kernelRuntime;
    if (!runtime) return undefined;
    // The kernel is python's (it runs every runtime's one-shot programs, as in pool pods): the
    // run's image must be the one python runs in.
    const { images } = opts;
    if (images[normalizeLanguage(run.spec.language)] !== images[POOL_LANGUAGE]) return undefined;
    await runtime.ensure(ns);
    return { command: kernelCommand(POOL_LANGUAGE, { prestart: true }), runtime: runtime.volume };
  }

  /** Creates the pod (or finds the run's own under its name); why not, when it cannot be had. */
  private async create(
    run: SandboxRun,
    ns: string,
    podName: string,
    log: Logger,
    opts: ColdPodOptions,
    profile: string,
    kernel: RunPodKernel | undefined,
  ): Promise<{ reason: typeof Reasons.PodFailed | typeof Reasons.QuotaExceeded; message: string } | undefined> {
    const runtime = normalizeLanguage(run.spec.language);
    const body = buildRunPod(
      run,
      sandboxPodOptions(opts, {
        image: opts.images[runtime],
        activeDeadlineSeconds: runPodSeconds(opts.podStartupTimeoutSeconds, run.spec.timeoutSeconds),
        profile,
        ...(run.spec.resources?.cpu && { cpuLimit: run.spec.resources.cpu }),
        ...(run.spec.resources?.memory && { memoryLimit: run.spec.resources.memory }),
      }),
      kernel,
    );
    try {
      await this.d.clients.core.createNamespacedPod({ namespace: ns, body });
      log.debug({ pod: podName }, 'Created Pod');
      return undefined;
    } catch (err) {
      // The namespace's ResourceQuota (deploy/) is the backstop behind the run caps: say so.
      const quota = quotaExceeded(statusOf(err), apiErrorMessage(err));
      if (quota)
        return {
          reason: Reasons.QuotaExceeded,
          message: `The namespace's ResourceQuota refused the sandbox pod (${quota}). Retry when other runs have finished, or ask the administrator to raise the quota.`,
        };
      // A 409 on the quota object (still, after the client's retries) is not a pod of this name.
      if (statusOf(err) !== 409 || isQuotaConflict(err)) throw new Error(`Failed to create Pod ${ns}/${podName}`, { cause: err });
      // Deterministic name: it exists already. Adopt it only if it is ours.
      const existing = await this.d.clients.core.readNamespacedPod({ namespace: ns, name: podName });
      const owner = existing.metadata?.ownerReferences?.find((o) => o.controller);
      if (owner?.uid !== run.metadata.uid) return { reason: Reasons.PodFailed, message: `A pod named ${podName} exists and does not belong to this run.` };
      return undefined;
    }
  }
}
