// A warm run's code started in this process's reserved pool pod while its SandboxRun is being
// created (RunExecutor.executeWhileCreating). Nothing of it leaves the sandbox before the run
// exists: its output is held and its tool calls wait until open(); a run that turns out not to
// exist is abandoned, its single-use pod deleted at once. The NetworkPolicy is in place before the
// code starts, as always.
import type { V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { normalizeLanguage, type SandboxRun } from '../api/v1alpha1/index.js';
import type { ColdPods } from './cold-pods.js';
import type { InPodExecution, PolicyGate } from './in-pod.js';
import type { RunEngineOptions } from './options.js';
import type { NestedCalls, OutputChunk, RunMetricsSink } from './types.js';
import type { PoolClaims, WarmClaims } from './warm-claims.js';

/** What the code did in its pod (InPodExecution). */
export type Executed = Awaited<ReturnType<InPodExecution['viaKernel']>>;

export interface EarlyStart {
  ns: string;
  podName: string;
  pool: PoolClaims;
  reserved: V1Pod;
  opts: RunEngineOptions;
  /** performance.now() at the start (the run's duration metric). */
  started: number;
  /** When the code was sent (the run's startTime and durationMs). */
  startTime: Date;
  executed: Promise<Executed>;
  /** Output held until the run exists; then `sink` takes it. */
  held: OutputChunk[];
  sink?: (chunk: OutputChunk) => void;
  /** The run exists: its tool calls go on. */
  open: () => void;
  /** It never will: its tool calls are refused. */
  refuse: (err: unknown) => void;
}

export interface EarlyStartDeps {
  warm: WarmClaims;
  policies: PolicyGate;
  inPod: InPodExecution;
  cold: ColdPods;
  log: Logger;
  metrics?: RunMetricsSink | undefined;
}

export class EarlyStarts {
  constructor(private readonly d: EarlyStartDeps) {}

  /**
   * Starts the code of `draft` (a run that may run, with its profile's settings `opts`) in the
   * reserved pod of its profile's pool in namespace `ns`: undefined when there is none.
   */
  async start(draft: SandboxRun, ns: string, profile: string, opts: RunEngineOptions, calls: NestedCalls | undefined): Promise<EarlyStart | undefined> {
    const pool = this.d.warm.poolFor(draft, profile, opts);
    if (!pool) return undefined;
    await this.d.policies.ensure(ns);
    const reserved = await pool.takeReserved();
    const podName = reserved?.metadata?.name;
    if (!reserved || podName === undefined) return undefined;
    this.d.metrics?.runStarted();
    let open!: () => void;
    let refuse!: (err: unknown) => void;
    const opened = new Promise<void>((resolve, reject) => {
      open = resolve;
      refuse = reject;
    });
    opened.catch(() => undefined);
    const early: Omit<EarlyStart, 'executed'> = {
      ns,
      podName,
      pool,
      reserved,
      opts,
      started: performance.now(),
      startTime: new Date(),
      held: [],
      open,
      refuse,
    };
    const onOutput = (stream: 'stdout' | 'stderr', text: string): void => {
      if (early.sink) early.sink({ stream, text });
      else early.held.push({ stream, text });
    };
    const onCall = calls && ((frame: Parameters<NestedCalls['handle']>[0]) => opened.then(() => calls.handle(frame)));
    return Object.assign(early, { executed: this.d.inPod.viaKernel(draft, ns, podName, normalizeLanguage(draft.spec.language), onOutput, onCall) });
  }

  /** A run started early whose create failed: its pod goes now, and nothing of it is kept. */
  abandon(early: EarlyStart): void {
    early.refuse(new Error('the run could not be recorded'));
    early.held.length = 0;
    early.sink = () => undefined;
    this.d.cold.delete(early.ns, early.podName, this.d.log);
    void early.executed.catch(() => undefined);
    early.pool.ensureReserved();
    this.d.metrics?.runEnded();
  }
}
