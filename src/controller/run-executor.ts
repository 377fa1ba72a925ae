// Executes one SandboxRun: sandbox pod → ready → one exec of the runner → final status.
// Status is written at most twice (Running, with a Started Event, only if the code is still
// executing after a short delay, and the final result), the pod is deleted afterwards (single
// use), and output streams to in-process subscribers while it runs. The caller's disconnect never
// cancels an execution.
import { EventEmitter } from 'node:events';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import {
  API_VERSION,
  GROUP,
  LABEL_RUN,
  LABEL_RUNTIME,
  Reasons,
  SANDBOXRUN_KIND,
  SANDBOXRUN_PLURAL,
  VERSION,
  kernelLanguage,
  normalizeLanguage,
  fitStatus,
  minimalStatus,
  type SandboxRun,
  type SandboxRunStatus,
} from '../api/v1alpha1/index.js';
import { parseQuantity } from '../config/quantity.js';
import { execInPod } from '../exec/exec.js';
import { KernelConnectionError, type KernelConnections } from '../exec/kernel.js';
import { newNonce, parseTrailer, runnerCommand, stripTrailer, KILL_GRACE_SECONDS } from '../exec/runner.js';
import { apiErrorMessage, isNotFound, isTooLarge, statusOf, type KubeClients } from '../kube/clients.js';
import type { OutputChunk, RunOutcome } from '../runs/types.js';
import { quotaExceeded } from '../runs/run-slots.js';
import { SANDBOX_CONTAINER, buildRunPod, sandboxPodOptions } from '../sandbox/pod.js';
import { podNameForRun } from '../sandbox/names.js';
import type { EventRecorder } from './events.js';
import type { ControllerOptions } from './options.js';
import type { PodWatcher } from './pod-watcher.js';
import { POOL_LANGUAGE, type WarmPool } from './warm-pool.js';
import { runLabelValue } from '../sandbox/names.js';
import { sessionOutcome } from '../sessions/outcome.js';
import { SessionError, type SessionService } from '../sessions/service.js';
import type { NetworkPolicyGuard } from './network-policy.js';
import type { SandboxGate } from '../selfcheck/checker.js';
import { classifyExecution, completedStatus, failedStatus, runningStatus, type Classification, type ExecutionFacts, type Limits } from './status.js';
import { podFailure, type PodFailure } from './bounds.js';

/** A run still executing after this long gets its Running status written. */
const RUNNING_WRITE_DELAY_MS = 250;
/** Longest pause between attempts to record a finished run's status (it is retried until it lands). */
const MAX_STATUS_RETRY_MS = 30_000;
/**
 * When the code's own report never came, how long to wait for the pod's status to say why (the
 * kubelet reports an OOM-killed container or an eviction a second or two after the stream ends).
 */
const POD_VERDICT_WAIT_MS = 8000;

/** What one execution produced, however it ran (runner exec in a cold pod, kernel in a warm one). */
interface Executed {
  facts: ExecutionFacts;
  captured: { stdout: string; stderr: string; stdoutBytes: number; stderrBytes: number; truncated: boolean };
}

export interface RunMetricsSink {
  runFinished(phase: string, reason: string, runtime: string, seconds: number): void;
  runStarted(): void;
  runEnded(): void;
}

interface Execution {
  promise: Promise<RunOutcome>;
  output: EventEmitter;
}

export interface RunExecutorDeps {
  clients: KubeClients;
  opts: ControllerOptions;
  pods: PodWatcher;
  policies: NetworkPolicyGuard;
  events: EventRecorder;
  log: Logger;
  metrics?: RunMetricsSink;
  /** The sandbox self-check: runs created with kubectl are refused like the gateway's. */
  gate?: Pick<SandboxGate, 'refusal'>;
}

/** Problems with a spec that the API schema cannot know (the administrator's limits). */
export function checkAgainstLimits(run: SandboxRun, opts: ControllerOptions): string | undefined {
  const problems: string[] = [];
  if (run.spec.timeoutSeconds > opts.maxTimeoutSeconds) {
    problems.push(`spec.timeoutSeconds=${run.spec.timeoutSeconds} is above the maximum ${opts.maxTimeoutSeconds}; use ${opts.maxTimeoutSeconds} or less`);
  }
  const bytes = Buffer.byteLength(run.spec.code, 'utf8');
  if (bytes > opts.maxCodeBytes) {
    problems.push(`spec.code is ${bytes} bytes, above the maximum ${opts.maxCodeBytes}; send smaller code or write data to files in steps`);
  }
  const cpu = run.spec.resources?.cpu;
  if (cpu && parseQuantity(cpu) > parseQuantity(opts.maxCpu)) problems.push(`spec.resources.cpu=${cpu} is above the maximum ${opts.maxCpu}`);
  const mem = run.spec.resources?.memory;
  if (mem && parseQuantity(mem) > parseQuantity(opts.maxMemory)) problems.push(`spec.resources.memory=${mem} is above the maximum ${opts.maxMemory}`);
  return problems.length ? `Invalid SandboxRun: ${problems.join('; ')}.` : undefined;
}

export class RunExecutor {
  private readonly executions = new Map<string, Execution>();
  /** Writes that go on after the caller has its result (final status, pod delete, Events). */
  private readonly settling = new Set<Promise<void>>();
  /** Runs whose outcome is known here but not yet stored in their status. */
  private readonly unrecorded = new Set<string>();
  private sessions: SessionService | undefined;
  private pool: WarmPool | undefined;
  private kernels: KernelConnections | undefined;

  constructor(private readonly d: RunExecutorDeps) {}

  /** Enables SandboxRun.spec.session (runs in a session's interpreter). */
  setSessions(sessions: SessionService): void {
    this.sessions = sessions;
  }

  /**
   * Enables warm-pool claims for runs whose image and limits match the pool's pods; the code
   * then runs through the pod's kernel, over a stream opened before the claim.
   */
  setPool(pool: WarmPool, kernels: KernelConnections): void {
    this.pool = pool;
    this.kernels = kernels;
  }

  /** A warm pod for this run, if the pool has one that fits (same image, default limits). */
  private async claimWarm(run: SandboxRun): Promise<string | undefined> {
    const { opts } = this.d;
    const runtime = normalizeLanguage(run.spec.language);
    if (!this.pool?.enabled || run.spec.resources || opts.images[runtime] !== opts.images[POOL_LANGUAGE]) return undefined;
    const owner = {
      apiVersion: API_VERSION,
      kind: SANDBOXRUN_KIND,
      name: run.metadata.name,
      uid: run.metadata.uid ?? '',
      controller: true,
      blockOwnerDeletion: true,
    };
    const pod = await this.pool.claim(
      owner,
      { [LABEL_RUN]: runLabelValue(run.metadata.name), [LABEL_RUNTIME]: runtime },
      opts.podStartupTimeoutSeconds + run.spec.timeoutSeconds + 60,
    );
    return pod?.metadata?.name;
  }

  /**
   * Executing here now, or its outcome not yet stored. Only a fast path for the controller: that a
   * run may have started is decided from the API (run-decision.ts), never from this memory.
   */
  isBusy(uid: string): boolean {
    return this.executions.has(uid) || this.unrecorded.has(uid);
  }

  /** Starts (or joins) the execution of a run. Idempotent per run UID. */
  execute(run: SandboxRun): Promise<RunOutcome> {
    const uid = run.metadata.uid ?? '';
    const existing = this.executions.get(uid);
    if (existing) return existing.promise;
    const output = new EventEmitter();
    output.setMaxListeners(0);
    const promise = this.run(run, output).finally(() => {
      this.executions.delete(uid);
      output.removeAllListeners();
    });
    this.executions.set(uid, { promise, output });
    return promise;
  }

  /** Subscribes to a running execution's output; returns an unsubscribe function. */
  subscribe(uid: string, listener: (chunk: OutputChunk) => void): () => void {
    const ex = this.executions.get(uid);
    if (!ex) return () => undefined;
    ex.output.on('chunk', listener);
    return () => ex.output.off('chunk', listener);
  }

  /** Waits for every execution in flight (graceful shutdown). */
  async drain(): Promise<void> {
    await Promise.allSettled([...this.executions.values()].map((e) => e.promise));
    await Promise.allSettled([...this.settling]);
  }

  private limits(run: SandboxRun): Limits {
    return {
      maxTimeoutSeconds: this.d.opts.maxTimeoutSeconds,
      memoryLimit: run.spec.resources?.memory ?? this.d.opts.defaultMemory,
      maxMemory: this.d.opts.maxMemory,
      workspaceSizeLimit: this.d.opts.workspaceSizeLimit,
      tmpSizeLimit: this.d.opts.tmpSizeLimit,
    };
  }

  private async run(run: SandboxRun, output: EventEmitter): Promise<RunOutcome> {
    const { opts } = this.d;
    const ns = run.metadata.namespace ?? opts.namespace;
    const name = run.metadata.name;
    const log = this.d.log.child({ sandboxrun: `${ns}/${name}` });
    const runtime = normalizeLanguage(run.spec.language);
    const started = performance.now();
    this.d.metrics?.runStarted();
    try {
      const invalid = checkAgainstLimits(run, opts);
      if (invalid) {
        return await this.finishEarly(run, Reasons.InvalidSpec, invalid, log);
      }
      const refused = await this.d.gate?.refusal();
      if (refused !== undefined) return await this.finishEarly(run, Reasons.SandboxNotEnforced, refused, log);
      if (run.spec.session !== undefined) return await this.runInSession(run, run.spec.session, output, log, started);
      await this.d.policies.ensure(ns);
      const warm = await this.claimWarm(run);
      if (warm) return await this.execute_(run, ns, warm, runtime, output, log, started, 'kernel');
      const podName = podNameForRun(name);
      const pod = await this.createPod(run, podName, log);
      if ('failure' in pod) return await this.finishEarly(run, pod.failure.reason, pod.failure.message, log);

      const state = await this.d.pods.waitReady(ns, podName, opts.podStartupTimeoutSeconds * 1000);
      if (state.kind !== 'ready') {
        const unsched = state.kind === 'pending' && state.message.startsWith('Unschedulable');
        const reason = state.kind === 'failed' ? state.reason : unsched ? Reasons.Unschedulable : Reasons.PodFailed;
        const message =
          state.kind === 'failed'
            ? state.message
            : `The sandbox pod did not start within ${opts.podStartupTimeoutSeconds}s (${state.message}). Try again later or ask the administrator to check the cluster's capacity.`;
        this.deletePod(ns, podName, log);
        return await this.finishEarly(run, reason, message, log);
      }
      return await this.execute_(run, ns, podName, runtime, output, log, started, 'runner');
    } catch (err) {
      log.error({ err: apiErrorMessage(err) }, 'Run failed unexpectedly');
      return await this.finishEarly(run, Reasons.ExecFailed, `The run could not be executed: ${apiErrorMessage(err)}.`, log);
    } finally {
      this.d.metrics?.runEnded();
    }
  }

  /**
   * Executes the code in a ready pod and returns the outcome as soon as it is known: the final
   * status write, the pod's deletion and the Events go on in the background (drain() waits),
   * so the caller's reply does not wait for them.
   */
  private async execute_(
    run: SandboxRun,
    ns: string,
    podName: string,
    runtime: ReturnType<typeof normalizeLanguage>,
    output: EventEmitter,
    log: Logger,
    started: number,
    via: 'runner' | 'kernel',
  ): Promise<RunOutcome> {
    const startTime = new Date();
    let finished = false;
    let runningWrite: Promise<void> = Promise.resolve();
    // A short run costs no write while it executes: the Running status and the Started Event are
    // written only for code still executing after RUNNING_WRITE_DELAY_MS.
    const runningTimer = setTimeout(() => {
      if (finished) return;
      runningWrite = this.patchStatus(run, runningStatus(run, podName, startTime, new Date()), log);
      this.d.events.record(
        { name: run.metadata.name, namespace: ns, uid: run.metadata.uid },
        'Normal',
        'Started',
        'Execute',
        `Executing ${runtime} code in pod ${podName}.`,
      );
    }, RUNNING_WRITE_DELAY_MS);
    const onOutput = (stream: 'stdout' | 'stderr', text: string): void => void output.emit('chunk', { stream, text } satisfies OutputChunk);
    const executed = via === 'kernel' ? await this.viaKernel(run, ns, podName, runtime, onOutput) : await this.viaRunner(run, ns, podName, runtime, onOutput);
    finished = true;
    clearTimeout(runningTimer);
    const end = new Date();
    const c = classifyExecution(executed.facts, run.spec.timeoutSeconds, this.limits(run));
    const status = this.fit(run, completedStatus(run, c, executed.captured, { start: startTime, end }));
    this.settle(
      run,
      (async () => {
        // After the reply has gone out: building and sending requests costs milliseconds of CPU.
        await new Promise((r) => setImmediate(r));
        await runningWrite;
        await this.patchStatus(run, status, log);
        // The pod is the run's marker that its code started (run-decision.ts): it goes only once the
        // outcome is stored. Its processes already ended with the program (or at the deadline).
        this.deletePod(ns, podName, log);
        this.recordOutcome(run, ns, c);
        this.d.metrics?.runFinished(c.phase, c.reason, runtime, (performance.now() - started) / 1000);
        log.info({ phase: c.phase, reason: c.reason, exitCode: c.exitCode, durationMs: status.durationMs }, 'Finished SandboxRun');
      })(),
    );
    return this.outcome(run, status);
  }

  private settle(run: SandboxRun, p: Promise<void>): void {
    const uid = run.metadata.uid ?? '';
    this.unrecorded.add(uid);
    const tracked = p
      .catch((err: unknown) => this.d.log.error({ err: apiErrorMessage(err) }, 'Failed to record a finished run'))
      .finally(() => {
        this.settling.delete(tracked);
        this.unrecorded.delete(uid);
      });
    this.settling.add(tracked);
  }

  /** A cold pod: one exec of the runner script, the code on its stdin. */
  private async viaRunner(
    run: SandboxRun,
    ns: string,
    podName: string,
    runtime: ReturnType<typeof normalizeLanguage>,
    onOutput: (stream: 'stdout' | 'stderr', text: string) => void,
  ): Promise<Executed> {
    const code = Buffer.from(run.spec.code, 'utf8');
    const stdin = run.spec.stdin ? Buffer.from(run.spec.stdin, 'utf8') : Buffer.alloc(0);
    const nonce = newNonce();
    const blocked = await this.policyGate(ns, podName);
    if (blocked) return blocked;
    const result = await execInPod(this.d.clients.exec, {
      namespace: ns,
      pod: podName,
      container: SANDBOX_CONTAINER,
      command: runnerCommand(runtime, run.spec.timeoutSeconds, code.length, nonce),
      stdin: Buffer.concat([code, stdin]),
      capChars: this.d.opts.outputCapChars,
      // The runner stops the program at its deadline; this only catches a lost connection.
      watchdogMs: (run.spec.timeoutSeconds + KILL_GRACE_SECONDS + 15) * 1000,
      onOutput,
    });
    const trailer = parseTrailer(result.stderrTail, nonce);
    const stderrText = stripTrailer(result.stderr.text, nonce);
    const verdict = trailer || result.watchdogFired ? undefined : await this.podVerdict(ns, podName);
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
        watchdogFired: result.watchdogFired,
        podGone: this.podGone(ns, podName),
      },
      captured: {
        stdout: result.stdout.text,
        stderr: stderrText,
        stdoutBytes: result.stdout.byteCount,
        stderrBytes: Math.max(0, result.stderr.byteCount - (trailer?.bytes ?? 0)),
        truncated: result.stdout.truncated || (result.stderr.truncated && result.stderr.byteCount - (trailer?.bytes ?? 0) > Buffer.byteLength(stderrText)),
      },
    };
  }

  /** A claimed warm pod: the kernel runs the code as a fresh program (op "run"). */
  private async viaKernel(
    run: SandboxRun,
    ns: string,
    podName: string,
    runtime: ReturnType<typeof normalizeLanguage>,
    onOutput: (stream: 'stdout' | 'stderr', text: string) => void,
  ): Promise<Executed> {
    const empty = { stdout: '', stderr: '', stdoutBytes: 0, stderrBytes: 0, truncated: false };
    try {
      if (!this.kernels) throw new KernelConnectionError('no kernel connections in this process');
      const conn = await this.kernels.get(ns, podName, SANDBOX_CONTAINER, POOL_LANGUAGE);
      const blocked = await this.policyGate(ns, podName);
      if (blocked) return blocked;
      const r = await conn.run(
        {
          language: runtime,
          code: run.spec.code,
          timeoutMs: run.spec.timeoutSeconds * 1000,
          capChars: this.d.opts.outputCapChars,
          ...(run.spec.stdin !== undefined && { stdin: run.spec.stdin }),
        },
        onOutput,
      );
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
        },
        captured: { stdout: r.stdout, stderr: r.stderr, stdoutBytes: r.stdoutBytes, stderrBytes: r.stderrBytes, truncated: r.truncated },
      };
    } catch (err) {
      if (!(err instanceof KernelConnectionError)) throw err;
      // The kernel's stream ended without a result: an OOM kill of the container or an eviction
      // ends it that way too, and the pod's status says so.
      const verdict = await this.podVerdict(ns, podName);
      return {
        facts: {
          exitCode: undefined,
          timedOut: false,
          oomKilled: false,
          runnerReported: false,
          execError: err.message,
          watchdogFired: false,
          podGone: this.podGone(ns, podName),
          ...(verdict !== undefined && { podFailure: verdict }),
        },
        captured: empty,
      };
    } finally {
      // Closing the stream waits until the reply has gone out; the pod is deleted anyway.
      setImmediate(() => this.kernels?.drop(ns, podName));
    }
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
      const empty = { stdout: '', stderr: '', stdoutBytes: 0, stderrBytes: 0, truncated: false };
      return {
        facts: {
          exitCode: undefined,
          timedOut: false,
          oomKilled: false,
          runnerReported: false,
          execError: (err as Error).message,
          watchdogFired: false,
          podGone: this.podGone(ns, podName),
        },
        captured: empty,
      };
    }
  }

  /** An OOM kill or eviction of the pod, once its status shows the container stopped (bounded wait). */
  private async podVerdict(ns: string, podName: string): Promise<PodFailure | undefined> {
    const stopped = (pod: V1Pod | undefined): boolean =>
      !pod ||
      pod.metadata?.deletionTimestamp !== undefined ||
      pod.status?.reason === 'Evicted' ||
      pod.status?.phase === 'Failed' ||
      pod.status?.phase === 'Succeeded' ||
      (pod.status?.containerStatuses ?? []).some((cs) => cs.state?.terminated !== undefined);
    return podFailure(await this.d.pods.waitFor(ns, podName, stopped, POD_VERDICT_WAIT_MS));
  }

  private podGone(ns: string, podName: string): boolean {
    const pod = this.d.pods.get(ns, podName);
    return !pod || pod.metadata?.deletionTimestamp !== undefined;
  }

  /** A SandboxRun with spec.session: the code runs in that session's interpreter. */
  private async runInSession(run: SandboxRun, session: string, output: EventEmitter, log: Logger, started: number): Promise<RunOutcome> {
    if (!this.sessions) return this.finishEarly(run, Reasons.InvalidSpec, 'Sessions are not available in this operator.', log);
    // A run in a session acts for its owner: only the session's owner's runs may use it.
    const info = this.sessions.list(run.spec.owner).find((s) => s.name === session);
    if (!info) return this.finishEarly(run, Reasons.InvalidSpec, `There is no SandboxSession "${session}" in this namespace; create it first.`, log);
    if (kernelLanguage(info.language) !== normalizeLanguage(run.spec.language) && !(run.spec.language === 'sh' && info.language === 'bash')) {
      return this.finishEarly(run, Reasons.InvalidSpec, `SandboxSession ${session} runs ${info.language}; spec.language is ${run.spec.language}.`, log);
    }
    const startTime = new Date();
    // The marker that this run's code may have started (run-decision.ts): a run in a session has
    // no pod of its own, so its Running status is written before the code goes to the kernel.
    const { podName: _none, ...marker } = runningStatus(run, '', startTime, startTime);
    await this.patchStatus(run, marker, log);
    try {
      const r = await this.sessions.execute(
        session,
        { code: run.spec.code, timeoutSeconds: run.spec.timeoutSeconds, ...(run.spec.stdin !== undefined && { stdin: run.spec.stdin }) },
        (stream, text) => output.emit('chunk', { stream, text } satisfies OutputChunk),
        run.spec.owner,
      );
      const o = sessionOutcome(r, run.metadata.namespace ?? this.d.opts.namespace, run.spec.timeoutSeconds);
      const c: Classification = {
        phase: o.phase,
        reason: (o.reason ?? Reasons.Succeeded) as Classification['reason'],
        message: o.message ?? 'The code ran to completion.',
        ...(o.exitCode !== undefined && { exitCode: o.exitCode }),
      };
      const status = this.fit(
        run,
        completedStatus(
          run,
          c,
          { stdout: o.stdout, stderr: o.stderr, stdoutBytes: o.stdoutBytes, stderrBytes: o.stderrBytes, truncated: o.truncated },
          { start: startTime, end: new Date() },
        ),
      );
      await this.patchStatus(run, status, log);
      this.recordOutcome(run, run.metadata.namespace ?? this.d.opts.namespace, c);
      this.d.metrics?.runFinished(c.phase, c.reason, normalizeLanguage(run.spec.language), (performance.now() - started) / 1000);
      return { ...this.outcome(run, status), session, ...(o.result !== undefined && { result: o.result }) };
    } catch (err) {
      if (err instanceof SessionError) return this.finishEarly(run, Reasons.KernelLost, `${err.message} ${err.hint}`, log);
      throw err;
    }
  }

  private async createPod(
    run: SandboxRun,
    podName: string,
    log: Logger,
  ): Promise<{ pod: V1Pod } | { failure: { reason: typeof Reasons.PodFailed | typeof Reasons.QuotaExceeded; message: string } }> {
    const { opts } = this.d;
    const ns = run.metadata.namespace ?? opts.namespace;
    const runtime = normalizeLanguage(run.spec.language);
    const body = buildRunPod(
      run,
      sandboxPodOptions(opts, {
        image: opts.images[runtime],
        activeDeadlineSeconds: opts.podStartupTimeoutSeconds + run.spec.timeoutSeconds + 60,
        ...(run.spec.resources?.cpu && { cpuLimit: run.spec.resources.cpu }),
        ...(run.spec.resources?.memory && { memoryLimit: run.spec.resources.memory }),
      }),
    );
    try {
      const pod = await this.d.clients.core.createNamespacedPod({ namespace: ns, body });
      log.debug({ pod: podName }, 'Created Pod');
      return { pod };
    } catch (err) {
      // The namespace's ResourceQuota (deploy/) is the backstop behind the run caps: say so.
      const quota = quotaExceeded(statusOf(err), apiErrorMessage(err));
      if (quota)
        return {
          failure: {
            reason: Reasons.QuotaExceeded,
            message: `The namespace's ResourceQuota refused the sandbox pod (${quota}). Retry when other runs have finished, or ask the administrator to raise the quota.`,
          },
        };
      if (statusOf(err) !== 409) throw new Error(`Failed to create Pod ${ns}/${podName}`, { cause: err });
      // Deterministic name: it exists already. Adopt it only if it is ours.
      const existing = await this.d.clients.core.readNamespacedPod({ namespace: ns, name: podName });
      const owner = existing.metadata?.ownerReferences?.find((o) => o.controller);
      if (owner?.uid !== run.metadata.uid) {
        return { failure: { reason: Reasons.PodFailed, message: `A pod named ${podName} exists and does not belong to this run.` } };
      }
      return { pod: existing };
    }
  }

  private deletePod(namespace: string, name: string, log: Logger): void {
    this.d.clients.core.deleteNamespacedPod({ namespace, name, gracePeriodSeconds: 0 }).catch((err: unknown) => {
      if (!isNotFound(err)) log.warn({ pod: name, err: apiErrorMessage(err) }, 'Failed to delete Pod');
    });
  }

  private async finishEarly(run: SandboxRun, reason: Parameters<typeof failedStatus>[1], message: string, log: Logger): Promise<RunOutcome> {
    const status = failedStatus(run, reason, message, new Date());
    await this.patchStatus(run, status, log);
    this.recordOutcome(run, run.metadata.namespace ?? this.d.opts.namespace, { phase: 'Failed', reason, message });
    this.d.metrics?.runFinished('Failed', reason, normalizeLanguage(run.spec.language), 0);
    log.info({ phase: 'Failed', reason }, 'Finished SandboxRun');
    return this.outcome(run, status);
  }

  private recordOutcome(run: SandboxRun, ns: string, c: Pick<Classification, 'phase' | 'reason' | 'message'>): void {
    const target = { name: run.metadata.name, namespace: ns, uid: run.metadata.uid };
    const type = c.phase === 'Succeeded' ? 'Normal' : 'Warning';
    this.d.events.record(target, type, c.phase === 'TimedOut' ? 'TimedOut' : c.phase, 'Complete', c.message);
  }

  /**
   * Merge-patches .status until it lands: a finished run must be recorded (its pod, the marker that
   * it started, is deleted only afterwards). Transient failures are retried with a capped backoff for
   * as long as this process lives; a status the API server refuses as too large or invalid is
   * replaced by a minimal one (outputs cut) once. A run deleted meanwhile is not an error.
   */
  async patchStatus(run: SandboxRun, wanted: SandboxRunStatus, log: Logger): Promise<void> {
    let status = this.fit(run, wanted);
    let refused = false;
    for (let attempt = 1; ; attempt++) {
      try {
        await this.d.clients.custom.patchNamespacedCustomObjectStatus(
          {
            group: GROUP,
            version: VERSION,
            namespace: run.metadata.namespace ?? this.d.opts.namespace,
            plural: SANDBOXRUN_PLURAL,
            name: run.metadata.name,
            body: { status },
          },
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        );
        return;
      } catch (err) {
        if (isNotFound(err)) return;
        // Larger than etcd takes (our size model missed something): record at least the outcome.
        if (isTooLarge(err)) {
          if (status.conditions !== null) {
            status = minimalStatus(status);
            continue;
          }
          return this.deleteUnrecordable(run, log);
        }
        const code = statusOf(err);
        if (code !== undefined && code >= 400 && code < 500 && code !== 409 && code !== 429) {
          // Refused as invalid: the minimal status once, then give up (it can never land).
          if (!refused) {
            refused = true;
            log.warn({ err: apiErrorMessage(err) }, 'SandboxRun status refused; writing a minimal one');
            status = minimalStatus(status);
            continue;
          }
          log.error({ err: apiErrorMessage(err) }, 'Failed to record the outcome of a SandboxRun');
          return;
        }
        if (attempt === 1 || attempt % 10 === 0) log.warn({ err: apiErrorMessage(err), attempt }, 'Failed to update SandboxRun status; retrying');
        await new Promise((r) => setTimeout(r, Math.min(MAX_STATUS_RETRY_MS, 100 * 2 ** attempt)));
      }
    }
  }

  /**
   * A run within a few hundred bytes of etcd's limit cannot take even a minimal status: left
   * alone it would never finish nor expire. Delete it and say why in an Event.
   */
  private async deleteUnrecordable(run: SandboxRun, log: Logger): Promise<void> {
    const ns = run.metadata.namespace ?? this.d.opts.namespace;
    log.warn('Deleted SandboxRun: it is too large to record its result');
    this.d.events.record(
      { name: run.metadata.name, namespace: ns, uid: run.metadata.uid },
      'Warning',
      'TooLarge',
      'Delete',
      'The SandboxRun is too large to store its result (etcd request limit); it was deleted. Send smaller code, stdin or annotations.',
    );
    await this.d.clients.custom
      .deleteNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: SANDBOXRUN_PLURAL, name: run.metadata.name })
      .catch((err: unknown) => {
        if (!isNotFound(err)) log.error({ err: apiErrorMessage(err) }, 'Failed to delete an unrecordable SandboxRun');
      });
  }

  /** What is stored (and returned): outputs cut to the byte cap and to what fits in etcd. */
  private fit(run: SandboxRun, status: SandboxRunStatus): SandboxRunStatus {
    return fitStatus(run, status, this.d.opts.outputCapBytes);
  }

  private outcome(run: SandboxRun, s: SandboxRunStatus): RunOutcome {
    const phase = s.phase === 'Succeeded' || s.phase === 'TimedOut' ? s.phase : 'Failed';
    return {
      runName: run.metadata.name,
      namespace: run.metadata.namespace ?? this.d.opts.namespace,
      phase,
      exitCode: s.exitCode,
      stdout: s.stdout ?? '',
      stderr: s.stderr ?? '',
      truncated: s.truncated ?? false,
      stdoutBytes: s.stdoutBytes ?? 0,
      stderrBytes: s.stderrBytes ?? 0,
      durationMs: s.durationMs,
      reason: s.reason,
      message: s.message,
    };
  }
}
