// Executes one SandboxRun: sandbox pod → ready → one execution → final status. A run goes to a
// claimed warm pool pod when one fits (warm-claims.ts; or this process's reserved one, started
// while the run is created: early-start.ts), else to a cold pod of its own (cold-pods.ts), or to a
// session's interpreter (spec.session, session-run.ts). Status is written at most twice (Running,
// with a Started Event, only if the code is still executing after a short delay, and the final
// result); the pod is deleted afterwards
// (single use, and it is the marker that the code started: see src/controller/run-decision.ts);
// output streams to in-process subscribers while it runs. The caller's disconnect never cancels an
// execution.
import type { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import {
  GROUP,
  Reasons,
  SANDBOXRUN_PLURAL,
  VERSION,
  isTerminalPhase,
  parseSandboxRun,
  normalizeLanguage,
  sentence,
  toolCallsStatus,
  type Runtime,
  type SandboxRun,
} from '../api/v1alpha1/index.js';
import type { KernelConnections } from '../exec/kernel.js';
import { imageCounts } from '../exec/display.js';
import { apiErrorMessage, type KubeClients } from '../kube/clients.js';
import type { EventRecorder } from '../kube/events.js';
import { invalidSpecMessage, limitProblems } from '../limits/spec-limits.js';
import { isRefusal, type ProfileRefusal } from '../profiles/catalog.js';
import { builtinProfile, type ResolvedProfile } from '../profiles/profile.js';
import type { PodWatcher } from '../sandbox/pod-watcher.js';
import type { SandboxGate } from '../selfcheck/checker.js';
import type { SessionService } from '../sessions/service.js';
import { InPodExecution, type PolicyGate } from './in-pod.js';
import { RunRecorder } from './record.js';
import { whenContainerStarted } from '../sandbox/container-started.js';
import { ColdPods, type KernelRuntime } from './cold-pods.js';
import { SessionRuns } from './session-run.js';
import { WarmClaims, type ProfilePools } from './warm-claims.js';
import { EarlyStarts, type EarlyStart, type Executed } from './early-start.js';
import { classifyExecution, completedStatus, failedStatus, type Classification, type Limits } from './status.js';
import type { NestedCalls, OutputChunk, RunMetricsSink, RunOutcome } from './types.js';
import type { RunEngineOptions } from './options.js';
import { recoverOutcome, type RecoveryDeps } from './recovery.js';
import { RunLedger } from './ledger.js';

/** The profiles runs may name (src/profiles ProfileCatalog). */
export interface Profiles {
  resolve(name?: string): ResolvedProfile | ProfileRefusal;
}

/** Why a run may not run: its status says so (finishEarly). */
interface Refusal {
  reason: Parameters<typeof failedStatus>[1];
  message: string;
}

export interface RunExecutorDeps {
  clients: KubeClients;
  opts: RunEngineOptions;
  pods: PodWatcher;
  policies: PolicyGate;
  events: EventRecorder;
  log: Logger;
  metrics?: RunMetricsSink;
  /** The sandbox self-check: runs created with kubectl are refused like the gateway's. */
  gate?: Pick<SandboxGate, 'refusal'>;
  /** The profiles runs may name; without it only the built-in profile (the settings in opts). */
  profiles?: Profiles;
}

export class RunExecutor {
  /** The run's record (status, Events); the controller writes through it too. */
  readonly record: RunRecorder;
  private readonly inPod: InPodExecution;
  /** The runs executing here, settling, started or being created (ledger.ts). */
  private readonly ledger = new RunLedger();
  /** The last SandboxRun create was refused: no code starts before its run exists (whileCreating). */
  private createRefused = false;
  /**
   * Runs in a pool pod, by uid: the pool (a reservation is made for the next run once this one is
   * recorded) and, for a reserved pod, the patch making it the run's (sent once, at the Running
   * status or after the outcome; awaited before the outcome is stored).
   */
  private readonly warm: WarmClaims;
  private readonly inSession: SessionRuns;
  /** The gateway's own settings as a profile (its pool is the PoolSet's business, not the engine's). */
  private readonly builtin: ResolvedProfile;
  private readonly cold: ColdPods;
  private readonly early: EarlyStarts;
  private readonly recovery: RecoveryDeps;

  constructor(private readonly d: RunExecutorDeps) {
    this.record = new RunRecorder({ clients: d.clients, events: d.events, namespace: d.opts.namespace, outputCapBytes: d.opts.outputCapBytes });
    this.builtin = builtinProfile({ ...d.opts, warmPoolMin: 0, warmPoolMax: 0 });
    this.warm = new WarmClaims(d.log);
    this.cold = new ColdPods({
      clients: d.clients,
      pods: d.pods,
      ...(d.metrics && { metrics: d.metrics }),
      kernelStream: {
        openWhenStarted: (ns, pod, until) =>
          void whenContainerStarted(d.clients.kc, ns, pod, until).then((started) => {
            if (started) this.inPod.openKernelAhead(ns, pod);
          }),
        drop: (ns, pod) => this.inPod.dropKernel(ns, pod),
      },
    });
    this.inSession = new SessionRuns({
      record: this.record,
      events: d.events,
      podStartupTimeoutSeconds: d.opts.podStartupTimeoutSeconds,
      ...(d.metrics && { metrics: d.metrics }),
      finishEarly: (run, reason, message, log, note) => this.finishEarly(run, reason, message, log, note),
    });
    this.inPod = new InPodExecution({
      clients: d.clients,
      pods: d.pods,
      policies: d.policies,
      outputCapChars: d.opts.outputCapChars,
      onStreamBroke: (outcome) => d.metrics?.streamBroke?.(outcome),
    });
    this.recovery = {
      record: this.record,
      inPod: this.inPod,
      inSession: this.inSession,
      cold: this.cold,
      events: d.events,
      limits: (run) => this.limits(run, d.opts),
    };
    this.early = new EarlyStarts({ warm: this.warm, policies: d.policies, inPod: this.inPod, cold: this.cold, log: d.log, metrics: d.metrics });
  }

  /** Enables SandboxRun.spec.session (runs in a session's interpreter). */
  setSessions(sessions: SessionService): void {
    this.inSession.setSessions(sessions);
  }

  /**
   * Enables warm-pool claims for runs whose image and limits match the pool's pods; the code
   * then runs through the pod's kernel, over a stream opened before the claim. With `runtime`
   * (this version has kernels), a cold pod runs the same kernel (coldKernel).
   */
  setPool(pools: ProfilePools, kernels: KernelConnections, runtime?: KernelRuntime): void {
    this.warm.setPools(pools);
    this.cold.setKernelRuntime(runtime);
    this.inPod.setKernels(kernels);
  }

  /**
   * Executing here now, or its outcome not yet stored. Only a fast path for the controller: that a
   * run may have started is decided from the API (run-decision.ts), never from this memory.
   */
  isBusy(uid: string): boolean {
    return this.ledger.isBusy(uid);
  }

  /** Whether this process started run `uid` (until forget()): the controller never starts it again. */
  ranHere(uid: string): boolean {
    return this.ledger.startedAlready(uid);
  }

  /**
   * Marks run `namespace/name` as being created by this process, which executes it as soon as the
   * create's answer is in; the returned function ends the mark (call it once execute() was called,
   * or the create failed). Only a fast path for the controller, as isBusy: its watch event can come
   * before the create's answer, and deciding then would read the whole run back for nothing.
   */
  creating(key: string): () => void {
    return this.ledger.creating(key);
  }

  /** See creating(). */
  isCreating(key: string): boolean {
    return this.ledger.isCreating(key);
  }

  /**
   * Starts (or joins) the execution of a run. Idempotent per run UID. `calls` answers the code's
   * nested tool calls (code mode) over the kernel's stream — a warm pod's, or a cold pod's started
   * with the same kernel — and their counts go into the final status.
   */
  execute(run: SandboxRun, calls?: NestedCalls): Promise<RunOutcome> {
    const uid = run.metadata.uid ?? '';
    const existing = this.ledger.execution(uid);
    if (existing) return existing.promise;
    // The last lines of exactly-once: a run whose object says it finished or started (read from the
    // API by the caller) is answered from that status, and one this process already ran (its
    // outcome on its way to the status) is never started again.
    if (isTerminalPhase(run.status?.phase) || run.status?.startTime !== undefined) return Promise.resolve(this.record.outcome(run, run.status ?? {}));
    if (this.ledger.startedAlready(uid)) return this.alreadyRan(run);
    return this.ledger.start(uid, this.keyOf(run), (output) => this.run(run, output, calls)).promise;
  }

  /**
   * Executes a run whose create this process has sent. `creation` gives the created run, or rejects
   * once it is certain that the run does not exist (KubeRunService reads after a lost answer).
   *
   * With a reserved pool pod of the run's profile at hand, the code starts before the create's
   * answer, and nothing of it leaves the sandbox before the run exists: its output is held, its
   * tool calls wait, its outcome is returned and recorded only after. A run that turns out not to
   * exist has its pod (single-use, no network) deleted at once and the caller gets the create's
   * error: what ran could be seen by no one. Exactly-once is unchanged: a run that exists carries
   * this process's identity as its executor and is marked as being created here until it is in
   * the executions, so no one else starts it, and this process starts it only here.
   *
   * Otherwise the run starts once it exists, as execute(). `endCreating` ends the creating mark:
   * once the run is in the executions (the controller finds it busy here) or could not be created.
   * `onStarted` is told whether code started before the create's answer, once that is decided.
   */
  executeWhileCreating(
    draft: SandboxRun,
    creation: Promise<SandboxRun>,
    endCreating: () => void,
    options: { calls?: NestedCalls; onOutput?: (chunk: OutputChunk) => void; onStarted?: (early: boolean) => void } = {},
  ): Promise<RunOutcome> {
    // Handled below, maybe only after the pool's reservation was looked at: never "unhandled".
    creation.catch(() => undefined);
    return this.ledger.whileCreating(this.whileCreating(draft, creation, endCreating, options));
  }

  private async whileCreating(
    draft: SandboxRun,
    creation: Promise<SandboxRun>,
    endCreating: () => void,
    { calls, onOutput, onStarted }: { calls?: NestedCalls; onOutput?: (chunk: OutputChunk) => void; onStarted?: (early: boolean) => void },
  ): Promise<RunOutcome> {
    const early = this.createRefused ? undefined : await this.startEarly(draft, calls).catch(() => undefined);
    onStarted?.(early !== undefined);
    let run: SandboxRun;
    try {
      run = await creation;
    } catch (err) {
      // Refused (a ResourceQuota, an admission policy): the next runs are created before their
      // code starts, until a create succeeds again, so that callers retrying against a full
      // quota do not use up a reserved pool pod each.
      this.createRefused = true;
      if (early) this.early.abandon(early);
      endCreating();
      throw err;
    }
    this.createRefused = false;
    const uid = run.metadata.uid ?? '';
    let output: EventEmitter | undefined;
    let done: Promise<RunOutcome>;
    if (early) {
      // The reserved pod is the run's before its execution goes on (executeInPod takes it).
      this.warm.useReserved(run, early.pool, early.reserved, early.opts);
      ({ promise: done, output } = this.ledger.start(uid, this.keyOf(run), (out) => this.finishStarted(run, early, out, calls)));
    } else {
      done = this.execute(run, calls);
      output = this.ledger.execution(uid)?.output;
    }
    endCreating();
    if (onOutput) output?.on('chunk', onOutput);
    if (early) {
      // What the code printed before the run existed, in order, then the rest as it comes.
      for (const chunk of early.held.splice(0)) onOutput?.(chunk);
      early.sink = (chunk) => void output?.emit('chunk', chunk);
      early.open();
    }
    try {
      return await done;
    } finally {
      if (onOutput) output?.off('chunk', onOutput);
    }
  }

  /**
   * Starts the code of a run not yet created in this process's reserved pool pod, if the run may
   * run (prepare) and its pool has one (early-start.ts): undefined otherwise.
   */
  private async startEarly(draft: SandboxRun, calls: NestedCalls | undefined): Promise<EarlyStart | undefined> {
    const prepared = await this.prepare(draft);
    if ('refusal' in prepared) return undefined;
    return this.early.start(draft, this.record.namespaceOf(draft), prepared.profile.name, prepared.opts, calls);
  }

  /** The rest of a run started early, now that it exists: its outcome, recorded as any warm run's. */
  private async finishStarted(run: SandboxRun, early: EarlyStart, output: EventEmitter, calls: NestedCalls | undefined): Promise<RunOutcome> {
    const log = this.d.log.child({ sandboxrun: `${early.ns}/${run.metadata.name}` });
    return this.guarded(run, log, () =>
      this.executeInPod(run, early.ns, early.podName, normalizeLanguage(run.spec.language), output, log, early.started, 'warm', early.opts, calls, {
        executed: early.executed,
        at: early.startTime,
      }),
    );
  }

  /**
   * The outcome `body` gives a run, or — when it throws — the run ended Failed with the error: the
   * end of every execution (its pool adoption is dropped and the in-flight metric goes down).
   */
  private async guarded(run: SandboxRun, log: Logger, body: () => Promise<RunOutcome>): Promise<RunOutcome> {
    try {
      return await body();
    } catch (err) {
      log.error({ err: apiErrorMessage(err) }, 'Run failed unexpectedly');
      return await this.finishEarly(run, Reasons.ExecFailed, sentence(`The run could not be executed: ${apiErrorMessage(err)}`), log);
    } finally {
      this.warm.forget(run.metadata.uid ?? '');
      this.d.metrics?.runEnded();
    }
  }

  /**
   * The outcome of a run this process already ran, for a second caller (the controller, handed an
   * object read before that outcome): once it is recorded, as its status says.
   */
  private async alreadyRan(run: SandboxRun): Promise<RunOutcome> {
    await this.ledger.settled(run.metadata.uid ?? '');
    try {
      const now = parseSandboxRun(
        await this.d.clients.custom.getNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          namespace: this.record.namespaceOf(run),
          plural: SANDBOXRUN_PLURAL,
          name: run.metadata.name,
        }),
      );
      if (now.ok && isTerminalPhase(now.run.status?.phase)) return this.record.outcome(now.run, now.run.status ?? {});
    } catch {
      // Unreadable now: the answer below says where the outcome is.
    }
    return ranHere(this.record.outcome(run, {}));
  }

  /**
   * This process need not remember having run it any more: the run is gone (its namespace/name),
   * or its outcome was seen and its budget is over (its uid: forgetAfter).
   */
  forget(run: { uid?: string; key?: string }): void {
    this.ledger.forget(run);
  }

  /** A finished run (its outcome seen) is forgotten once `ms`, what is left of its budget, are over. */
  forgetFinished(uid: string, ms: number): void {
    this.ledger.forgetAfter(uid, ms);
  }

  /**
   * Records the outcome of a run that may have started and whose executor is gone (another
   * replica found stopped, or an outcome never recorded), claimed by this process: read back from
   * the kernel that carries it (recovery.ts), else Failed with `message`. Never starts the code.
   * Resolves to how the run ended.
   */
  recover(run: SandboxRun, pods: readonly string[], message: string, budgetMs: number): Promise<Classification | undefined> {
    const log = this.d.log.child({ sandboxrun: `${this.record.namespaceOf(run)}/${run.metadata.name}` });
    const work = recoverOutcome(this.recovery, run, pods, message, budgetMs, log);
    // Busy here until recorded (isBusy); a failure to record is logged there and resolves to undefined.
    this.settle(
      run,
      work.then(() => undefined),
    );
    return work.catch(() => undefined);
  }

  /**
   * Waits for every execution in flight and its record (graceful shutdown), including runs that
   * start while it waits: a stopping replica's HTTP server still answers a request that reaches it
   * late, and that run's outcome must land in its status before the process exits.
   */
  drain(): Promise<void> {
    return this.ledger.drain();
  }

  /** namespace/name: the key forget() is told about a run that is gone by. */
  private keyOf(run: SandboxRun): string {
    return `${this.record.namespaceOf(run)}/${run.metadata.name}`;
  }

  private limits(run: SandboxRun, opts: RunEngineOptions): Limits {
    return {
      maxTimeoutSeconds: opts.maxTimeoutSeconds,
      memoryLimit: run.spec.resources?.memory ?? opts.defaultMemory,
      maxMemory: opts.maxMemory,
      workspaceSizeLimit: opts.workspaceSizeLimit,
      workspaceMedium: opts.workspaceMedium,
      tmpSizeLimit: opts.tmpSizeLimit,
    };
  }

  /** The run's profile (its image, limits and pool), or why it cannot be used. */
  private profileOf(run: SandboxRun): ResolvedProfile | ProfileRefusal {
    return this.d.profiles?.resolve(run.spec.profile) ?? this.builtin;
  }

  /** The run's profile and settings, or why it may not run (checked before any of its code starts). */
  private async prepare(run: SandboxRun): Promise<{ profile: ResolvedProfile; opts: RunEngineOptions } | { refusal: Refusal }> {
    // A run in a session uses the session's profile: its own is not looked at.
    const profile = run.spec.session === undefined ? this.profileOf(run) : this.builtin;
    if (isRefusal(profile)) return { refusal: { reason: Reasons.InvalidSpec, message: `${profile.message} ${profile.hint}` } };
    const opts: RunEngineOptions = { ...this.d.opts, ...profile.shape };
    const invalid = invalidSpecMessage(limitProblems(run.spec, opts, true));
    if (invalid) return { refusal: { reason: Reasons.InvalidSpec, message: invalid } };
    const refused = await this.d.gate?.refusal();
    if (refused !== undefined) return { refusal: { reason: Reasons.SandboxNotEnforced, message: refused } };
    return { profile, opts };
  }

  private async run(run: SandboxRun, output: EventEmitter, calls?: NestedCalls): Promise<RunOutcome> {
    const ns = this.record.namespaceOf(run);
    const name = run.metadata.name;
    const log = this.d.log.child({ sandboxrun: `${ns}/${name}` });
    const runtime = normalizeLanguage(run.spec.language);
    const started = performance.now();
    this.d.metrics?.runStarted();
    return this.guarded(run, log, async () => {
      const prepared = await this.prepare(run);
      if ('refusal' in prepared) return await this.finishEarly(run, prepared.refusal.reason, prepared.refusal.message, log);
      const { profile, opts } = prepared;
      if (run.spec.session !== undefined) return await this.inSession.run(run, run.spec.session, output, log, started);
      await this.d.policies.ensure(ns);
      const created = this.d.policies.createdAfterEnsure(ns);
      const warm = await this.warm.claim(run, profile.name, opts);
      if (warm) return await this.executeInPod(run, ns, warm, runtime, output, log, started, 'warm', opts, calls);
      const cold = await this.cold.start(run, ns, opts, profile.name, log, created);
      if ('failure' in cold) return await this.finishEarly(run, cold.failure.reason, cold.failure.message, log);
      return await this.executeInPod(run, ns, cold.podName, runtime, output, log, started, cold.kernel ? 'cold-kernel' : 'cold', opts, calls);
    });
  }

  /**
   * Executes the code in a ready pod and returns the outcome as soon as it is known: the final
   * status write, the pod's deletion and the Events go on in the background (drain() waits),
   * so the caller's reply does not wait for them.
   */
  private async executeInPod(
    run: SandboxRun,
    ns: string,
    podName: string,
    runtime: Runtime,
    output: EventEmitter,
    log: Logger,
    started: number,
    pod: 'warm' | 'cold' | 'cold-kernel',
    opts: RunEngineOptions,
    calls?: NestedCalls,
    /** The code's execution and its start, when it started before the run was created (executeWhileCreating). */
    startedEarly?: { executed: Promise<Executed>; at: Date },
  ): Promise<RunOutcome> {
    const startTime = startedEarly?.at ?? new Date();
    const pooled = this.warm.take(run.metadata.uid ?? '');
    // A reserved pool pod is made the run's (adopt) before its Running status says so.
    const running = this.record.markRunningLater(run, podName, runtime, startTime, log, () => void pooled?.adopt?.());
    const onOutput = (stream: 'stdout' | 'stderr', text: string): void => void output.emit('chunk', { stream, text } satisfies OutputChunk);
    const executed = startedEarly
      ? await startedEarly.executed
      : pod !== 'cold'
        ? await this.inPod.viaKernel(run, ns, podName, runtime, onOutput, calls && ((frame) => calls.handle(frame)))
        : await this.inPod.viaRunner(run, ns, podName, runtime, onOutput);
    running.stop();
    const c = classifyExecution(executed.facts, run.spec.timeoutSeconds, this.limits(run, opts));
    this.d.metrics?.output?.(executed.captured.stdoutBytes, executed.captured.stderrBytes);
    const toolCalls = calls?.summary();
    const status = this.record.fit(run, {
      ...completedStatus(run, c, executed.captured, { start: startTime, end: new Date() }),
      // The pod it ran in (a warm run's pod was reserved or claimed: the record says which).
      podName,
      ...(toolCalls && toolCalls.calls > 0 && { toolCalls: toolCallsStatus(toolCalls) }),
      ...imageCounts(executed.display),
    });
    this.settle(
      run,
      (async () => {
        // After the reply has gone out: building and sending requests costs milliseconds of CPU.
        await new Promise((r) => setImmediate(r));
        // The next warm run's pod, reserved now rather than after this record: a caller sending
        // calls back to back finds it (or its patch in flight) instead of claiming on its path.
        pooled?.pool.ensureReserved();
        await running.written();
        // A reserved pod is relabelled only for a run that outlived the Running write's delay.
        await pooled?.adopting?.();
        await this.record.patchStatus(run, status, log);
        // The pod is the run's marker that its code started (run-decision.ts): it goes only once the
        // outcome is stored. Its processes already ended with the program (or at the deadline).
        this.cold.delete(ns, podName, log);
        this.record.recordOutcome(run, c);
        this.d.metrics?.runFinished(c.phase, c.reason, runtime, (performance.now() - started) / 1000, pod === 'warm' ? 'warm' : 'cold');
        log.info({ phase: c.phase, reason: c.reason, exitCode: c.exitCode, durationMs: status.durationMs }, 'Finished SandboxRun');
      })(),
    );
    // Images go to the caller only; the status keeps their counts (imageCounts above).
    const outcome = this.record.outcome(run, status);
    return executed.display !== undefined ? { ...outcome, display: executed.display } : outcome;
  }

  private settle(run: SandboxRun, p: Promise<void>): void {
    // One settle per run: execute() never starts a run twice (the ledger's startedAlready).
    this.ledger.settle(
      run.metadata.uid ?? '',
      p.catch((err: unknown) => this.d.log.error({ err: apiErrorMessage(err) }, 'Failed to record a finished run')),
    );
  }

  private async finishEarly(run: SandboxRun, reason: Parameters<typeof failedStatus>[1], message: string, log: Logger, note?: string): Promise<RunOutcome> {
    const status = failedStatus(run, reason, message, new Date());
    await this.record.patchStatus(run, status, log);
    this.record.recordOutcome(run, { phase: 'Failed', reason, message, ...(note !== undefined && { note }) });
    this.d.metrics?.runFinished('Failed', reason, normalizeLanguage(run.spec.language), 0);
    log.info({ phase: 'Failed', reason }, 'Finished SandboxRun');
    return this.record.outcome(run, status);
  }
}

/** What a second execute() of a run this process already ran answers (the controller ignores it). */
function ranHere(o: RunOutcome): RunOutcome {
  return {
    ...o,
    phase: 'Failed',
    reason: Reasons.ExecFailed,
    message: 'This run was already executed by this gateway replica; its outcome is in the SandboxRun status.',
  };
}
