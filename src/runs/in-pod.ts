// Executes a run's code in a ready sandbox pod and reports what happened, without judging it
// (status.ts classifies): a cold pod runs the runner script through one exec, a claimed warm pod
// (or a cold pod started with a kernel, for code-mode calls) runs it through its kernel. Everything read from the pod is untrusted and already bounded by the
// exec and kernel layers; a broken stream or a pod that died becomes facts, never an exception.
import type { V1Pod } from '@kubernetes/client-node';
import { recallBelieved, recallProofOf, type SandboxRun } from '../api/v1alpha1/index.js';
import type { Runtime } from '../api/v1alpha1/index.js';
import { execInPod, type ExecResult } from '../exec/exec.js';
import type { DisplayItem } from '../exec/display.js';
import { NOT_ISOLATED_AT_START_MESSAGE, NOT_ISOLATED_MESSAGE, passedNetcheck } from '../exec/frames.js';
import type { KernelResult } from '../exec/frames.js';
import { untilOpened } from '../exec/open-wait.js';
import { KernelConnectionError, type CallHandler, type KernelConnection, type KernelConnections } from '../exec/kernel.js';
import { KernelProtocolError } from '../exec/kernel-stream.js';
import { readingUser } from '../exec/read-budget.js';
import { newNonce, parseTrailer, runnerCommand, stripTrailer, KILL_GRACE_SECONDS } from '../exec/runner.js';
import type { KubeClients } from '../kube/clients.js';
import { kernelRefusedNetwork, podFailure, podStopped, type PodFailure } from '../sandbox/pod-failure.js';
import { POOL_LANGUAGE, SANDBOX_CONTAINER } from '../sandbox/pod.js';
import { RECALL_AFTER_BREAK_GRACE_MS, recallAfterBreak, recallOnce, type RecallTarget, type StreamBreakOutcome } from '../exec/recall.js';
import type { PodWatcher } from '../sandbox/pod-watcher.js';
import type { ExecutionFacts } from './status.js';
import { OPEN_WAIT_MS } from '../sandbox/deadlines.js';

/**
 * When the code's own report never came, how long to wait for the pod's status to say why (the
 * kubelet reports an OOM-killed container or an eviction a second or two after the stream ends).
 */
const POD_VERDICT_WAIT_MS = 8000;

/** What one execution produced, however it ran (runner exec in a cold pod, kernel in a warm one). */
export interface Executed {
  facts: ExecutionFacts;
  captured: { stdout: string; stderr: string; stdoutBytes: number; stderrBytes: number; truncated: boolean };
  /** Images, HTML and tables the code displayed (kernel runs only): for the caller, never stored. */
  display?: DisplayItem[];
  /** How long the code ran, by the kernel's clock (kernel runs only). */
  durationMs?: number;
}

/** The sandbox NetworkPolicy, checked just before code is sent (src/controller/network-policy.ts). */
export interface PolicyGate {
  ensure(namespace: string): Promise<void>;
  /**
   * After ensure(): whether the kernel must check that its pod has no network before the code
   * starts (undefined: no), and then what to call once that check passed.
   */
  inPodCheck(namespace: string, pod: string): (() => void) | undefined;
  /** Right after ensure(), before creating sandbox pods: what to call with each created pod's name. */
  createdAfterEnsure(namespace: string): (pod: string) => void;
}

export interface InPodDeps {
  clients: KubeClients;
  pods: PodWatcher;
  policies: PolicyGate;
  /** Per stream, characters kept of the output. */
  outputCapChars: number;
  /** Told when a run's stream broke after its code was sent, and whether its outcome was read back. */
  onStreamBroke?(outcome: StreamBreakOutcome): void;
}

export type OnOutput = (stream: 'stdout' | 'stderr', text: string) => void;

const NOTHING_CAPTURED = { stdout: '', stderr: '', stdoutBytes: 0, stderrBytes: 0, truncated: false };

/** A runner exec whose stream never opened: nothing of it reached the pod (viaRunner). */
class NeverOpened extends Error {
  constructor(readonly result: ExecResult) {
    super(`the exec stream did not open: ${result.error ?? 'no reason given'}`);
    this.name = 'NeverOpened';
  }
}

/** Code that was never started, and why. */
function notRun(why: string, podGone: boolean): Executed {
  return {
    facts: { exitCode: undefined, timedOut: false, oomKilled: false, runnerReported: false, execError: why, codeSent: false, watchdogFired: false, podGone },
    captured: NOTHING_CAPTURED,
  };
}

export class InPodExecution {
  private kernels: KernelConnections | undefined;

  constructor(private readonly d: InPodDeps) {}

  /** Enables execution in warm pool pods, through their kernels. */
  setKernels(kernels: KernelConnections): void {
    this.kernels = kernels;
  }

  /** A cold pod: one exec of the runner script, the code on its stdin. */
  async viaRunner(run: SandboxRun, ns: string, podName: string, runtime: Runtime, onOutput: OnOutput): Promise<Executed> {
    const code = Buffer.from(run.spec.code, 'utf8');
    const stdin = run.spec.stdin ? Buffer.from(run.spec.stdin, 'utf8') : Buffer.alloc(0);
    const nonce = newNonce();
    const blocked = await this.policyGate(ns, podName);
    if (blocked) return blocked;
    const attempt = (): Promise<ExecResult> =>
      execInPod(this.d.clients.exec, {
        namespace: ns,
        pod: podName,
        container: SANDBOX_CONTAINER,
        command: runnerCommand(runtime, run.spec.timeoutSeconds, code.length, nonce, stdin.length),
        stdin: Buffer.concat([code, stdin]),
        capChars: this.d.outputCapChars,
        // The runner stops the program at its deadline; this only catches a lost connection.
        watchdogMs: (run.spec.timeoutSeconds + KILL_GRACE_SECONDS + 15) * 1000,
        onOutput,
      });
    // An exec that never opened started nothing (its stdin, the code, goes only over an open
    // stream): it is tried again as a kernel's stream is (openKernel).
    const result = await this.untilReached(ns, podName, async () => {
      const r = await attempt();
      if (!r.opened && !r.watchdogFired) throw new NeverOpened(r);
      return r;
    }).catch((err: unknown) => {
      if (err instanceof NeverOpened) return err.result;
      throw err;
    });
    const trailer = parseTrailer(result.stderrTail, nonce);
    const stderrText = stripTrailer(result.stderr.text, nonce);
    const verdict = trailer || result.watchdogFired ? undefined : await this.podVerdict(ns, podName);
    const stderrBytes = Math.max(0, result.stderr.byteCount - (trailer?.bytes ?? 0));
    return {
      facts: {
        exitCode: trailer?.exitCode ?? result.exitCode,
        timedOut: trailer?.timedOut ?? false,
        oomKilled: trailer?.oomKilled ?? false,
        processLimit: trailer?.processLimit ?? false,
        ...(trailer?.diskFull !== undefined && { diskFull: trailer.diskFull }),
        ...(trailer !== undefined && { leftovers: trailer.leftovers }),
        ...(verdict !== undefined && { podFailure: verdict }),
        runnerReported: trailer !== undefined,
        execError: result.error,
        codeSent: result.opened,
        watchdogFired: result.watchdogFired,
        podGone: this.podGone(ns, podName),
        stderrBytes,
      },
      captured: {
        stdout: result.stdout.text,
        stderr: stderrText,
        stdoutBytes: result.stdout.byteCount,
        stderrBytes,
        truncated: result.stdout.truncated || (result.stderr.truncated && stderrBytes > Buffer.byteLength(stderrText)),
      },
    };
  }

  /**
   * Opens the stream to a pod's kernel ahead of its run (a cold pod whose container started):
   * viaKernel then finds it open or opening. A failed open is forgotten (viaKernel opens again).
   */
  openKernelAhead(ns: string, podName: string): void {
    void this.kernels?.get(ns, podName, SANDBOX_CONTAINER, POOL_LANGUAGE).catch(() => undefined);
  }

  /** Closes this process's stream to a pod's kernel, if it has one (a pod that will not run code). */
  dropKernel(ns: string, podName: string): void {
    this.kernels?.drop(ns, podName);
  }

  /** A pod whose main process is the kernel (warm, or cold for code mode): the code runs as a fresh program (op "run"). */
  async viaKernel(run: SandboxRun, ns: string, podName: string, runtime: Runtime, onOutput: OnOutput, onCall?: CallHandler): Promise<Executed> {
    /** performance.now() when the run frame was sent (undefined: not sent). */
    let sentAt: number | undefined;
    try {
      if (!this.kernels) throw new KernelConnectionError('no kernel connections in this process');
      const conn = await this.openKernel(this.kernels, ns, podName, run);
      const blocked = await this.policyGate(ns, podName);
      if (blocked) return blocked;
      const checked = this.d.policies.inPodCheck(ns, podName);
      const proof = recallProofOf(run);
      sentAt = performance.now();
      const r = await conn.run(
        {
          language: runtime,
          // The kernel keeps the result under the run's name: a replica that finds this one gone
          // reads it back (RunExecutor.recover) instead of recording the outcome as unknown.
          key: run.metadata.name,
          ...(proof !== undefined && { proof }),
          code: run.spec.code,
          timeoutMs: run.spec.timeoutSeconds * 1000,
          capChars: this.d.outputCapChars,
          ...(run.spec.stdin !== undefined && { stdin: run.spec.stdin }),
          ...(checked && { netcheck: true }),
        },
        onOutput,
        onCall,
      );
      if (r.notIsolated) return notRun(NOT_ISOLATED_MESSAGE, this.podGone(ns, podName));
      if (passedNetcheck(r)) checked?.();
      return await this.fromKernel(r, ns, podName);
    } catch (err) {
      if (!(err instanceof KernelConnectionError)) throw err;
      // The stream broke after the run was sent (an API server or kubelet restart, a network
      // break): the kernel runs the code to its end all the same and keeps the result, so it is
      // asked again rather than the outcome recorded as unknown. Not a pod that broke the protocol.
      if (sentAt !== undefined && !(err instanceof KernelProtocolError)) {
        const again = await this.recallAfterBreak(run, ns, podName, sentAt + run.spec.timeoutSeconds * 1000 + RECALL_AFTER_BREAK_GRACE_MS, onCall);
        this.d.onStreamBroke?.(again ? 'recalled' : 'unknown');
        if (again) return again;
      }
      // The kernel's stream ended without a result: an OOM kill of the container or an eviction
      // ends it that way too, and the pod's status says so. So does a kernel that refused to start
      // because its pod could reach the network: believed only when no code was sent to this
      // single-use pod, as code could exit with the same code.
      const stopped = await this.stoppedPod(ns, podName);
      const verdict = podFailure(stopped);
      const refusedNetwork = sentAt === undefined && kernelRefusedNetwork(stopped);
      return {
        facts: {
          exitCode: undefined,
          timedOut: false,
          oomKilled: false,
          runnerReported: false,
          execError: refusedNetwork ? NOT_ISOLATED_AT_START_MESSAGE : err.message,
          // Nothing is sent before sentAt: a stream that never opened (or whose kernel never
          // answered its ping) carried none of the code.
          codeSent: sentAt !== undefined,
          watchdogFired: false,
          podGone: this.podGone(ns, podName),
          ...(verdict !== undefined && { podFailure: verdict }),
        },
        captured: NOTHING_CAPTURED,
      };
    } finally {
      // Closing the stream waits until the reply has gone out; the pod is deleted anyway.
      setImmediate(() => this.kernels?.drop(ns, podName));
    }
  }

  /**
   * The stream to the pod's kernel, tried again while it cannot be opened and the pod runs
   * (untilReached): the API server or the kubelet unreachable or refusing the exec for a while (a
   * restart, an outage) need not end a run whose pod is ready. Nothing of the code has been sent
   * then, so trying again cannot run it twice.
   */
  private openKernel(kernels: KernelConnections, ns: string, podName: string, run: SandboxRun): Promise<KernelConnection> {
    return this.untilReached(ns, podName, () => kernels.get(ns, podName, SANDBOX_CONTAINER, POOL_LANGUAGE, readingUser(run.spec.owner)));
  }

  /**
   * `open`, tried again for at most OPEN_WAIT_MS (src/exec/open-wait.ts) while it fails with a
   * connection error before anything was sent and the pod runs.
   */
  private untilReached<T>(ns: string, podName: string, open: () => Promise<T>): Promise<T> {
    return untilOpened(open, {
      maxMs: OPEN_WAIT_MS,
      // A kernel that broke the protocol is not waited for again.
      retryable: (error) =>
        (error instanceof NeverOpened || (error instanceof KernelConnectionError && !(error instanceof KernelProtocolError))) &&
        !podStopped(this.d.pods.get(ns, podName)) &&
        !this.podGone(ns, podName),
    });
  }

  /**
   * What the kernel of `podName` did with `run`, read back after the replica that sent it stopped
   * (the kernel keeps a run's result under its name, and answers a recall made while the run still
   * goes on once it ends, within `timeoutMs`). Undefined when the pod cannot tell: its kernel is
   * gone or unreachable, or it never ran this run. Nothing here starts code.
   */
  async recall(run: SandboxRun, ns: string, podName: string, timeoutMs: number): Promise<Executed | undefined> {
    if (!this.kernels) return undefined;
    try {
      const r = await recallOnce(this.recallTarget(this.kernels, run, ns, podName), timeoutMs);
      // Another run's code in a pod that may carry this one could answer for it: only an answer
      // with this run's proof is its kernel's (ANNOTATION_RECALL_PROOF).
      return 'result' in r && recallBelieved(run, r.result.proof) ? await this.fromKernel(r.result, ns, podName) : undefined;
    } finally {
      setImmediate(() => this.kernels?.drop(ns, podName));
    }
  }

  /**
   * recall() after this replica's own stream broke: tried again while the pod runs, until `until`.
   * The run's tool calls go on over the new stream (`onCall`).
   */
  private async recallAfterBreak(run: SandboxRun, ns: string, podName: string, until: number, onCall?: CallHandler): Promise<Executed | undefined> {
    if (!this.kernels) return undefined;
    try {
      const r = await recallAfterBreak(this.recallTarget(this.kernels, run, ns, podName, onCall), until);
      return r && (await this.fromKernel(r, ns, podName));
    } finally {
      setImmediate(() => this.kernels?.drop(ns, podName));
    }
  }

  /** The pool pod's kernel, asked for the run by its name; the pod watcher says when it stopped. */
  private recallTarget(kernels: KernelConnections, run: SandboxRun, ns: string, podName: string, onCall?: CallHandler): RecallTarget {
    return {
      ...(onCall && { onCall }),
      connect: () => kernels.get(ns, podName, SANDBOX_CONTAINER, POOL_LANGUAGE, readingUser(run.spec.owner)),
      key: run.metadata.name,
      capChars: this.d.outputCapChars,
      stopped: () => podStopped(this.d.pods.get(ns, podName)),
    };
  }

  /** A kernel's result as facts; when the program's end was not reported, the pod's status may say why. */
  private async fromKernel(r: KernelResult, ns: string, podName: string): Promise<Executed> {
    const reported = (r.status === 'ok' || r.status === 'timeout') && r.exitCode !== undefined;
    const verdict = reported ? undefined : await this.podVerdict(ns, podName);
    return {
      facts: {
        exitCode: r.exitCode,
        timedOut: r.timedOut ?? r.status === 'timeout',
        oomKilled: r.oomKilled ?? false,
        processLimit: r.processLimit === true,
        ...(r.diskFull === 'workspace' || r.diskFull === 'tmp' ? { diskFull: r.diskFull } : {}),
        ...(typeof r.leftovers === 'number' && Number.isSafeInteger(r.leftovers) && r.leftovers >= 0 && { leftovers: r.leftovers }),
        ...(verdict !== undefined && { podFailure: verdict }),
        runnerReported: reported,
        execError: reported ? undefined : `${r.error?.ename ?? 'KernelError'}: ${r.error?.evalue ?? r.status}`,
        watchdogFired: false,
        podGone: this.podGone(ns, podName),
        stderrBytes: r.stderrBytes,
      },
      captured: { stdout: r.stdout, stderr: r.stderr, stdoutBytes: r.stdoutBytes, stderrBytes: r.stderrBytes, truncated: r.truncated },
      ...(r.display !== undefined && { display: r.display }),
      durationMs: r.durationMs,
    };
  }

  /**
   * Checked as late as possible, just before the code is sent: code never starts while the
   * sandbox NetworkPolicy is known missing or altered (a restore is waited for, bounded).
   */
  private async policyGate(ns: string, podName: string): Promise<Executed | undefined> {
    try {
      await this.d.policies.ensure(ns);
      return undefined;
    } catch (err) {
      return notRun((err as Error).message, this.podGone(ns, podName));
    }
  }

  /** An OOM kill or eviction of the pod, once its status shows the container stopped (bounded wait). */
  private async podVerdict(ns: string, podName: string): Promise<PodFailure | undefined> {
    return podFailure(await this.stoppedPod(ns, podName));
  }

  /** The pod once it stopped running code, waited for a bounded time (what it says then). */
  private stoppedPod(ns: string, podName: string): Promise<V1Pod | undefined> {
    return this.d.pods.waitFor(ns, podName, podStopped, POD_VERDICT_WAIT_MS);
  }

  private podGone(ns: string, podName: string): boolean {
    const pod = this.d.pods.get(ns, podName);
    return !pod || pod.metadata?.deletionTimestamp !== undefined;
  }
}
