// Metrics a dashboard of the service needs beyond the controller's (issue 10): how long a sandbox
// takes to start (a warm claim or a cold pod), how long calls wait for a run slot or a busy
// session, the warm pool's ready pods, the sessions, output sizes, and the outcomes of calls in a
// session (those create no SandboxRun, so codemode_runs_total does not see them). Gauges of cached state are
// computed when Prometheus scrapes, from the informer caches: no API request, nothing on a call's
// path. Every label value comes from a closed set declared in src/api or here.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { Reasons, SessionPhaseSchema, type SessionPhase } from '../api/v1alpha1/index.js';
import { QUEUE_WAIT_RESULTS, type QueueWaitResult } from '../limits/admission.js';
import { WAIT_RESULTS, type WaitResult } from '../sessions/turns.js';
import { STREAM_BREAK_OUTCOMES, type StreamBreakOutcome } from '../exec/recall.js';

/** How a sandbox was got: a ready pool pod claimed (warm) or a pod created for the call (cold). */
export type PodStart = 'warm' | 'cold';

/** Where a call's exec stream to its kernel broke: a transient run's pod, or a session. */
export const STREAM_BREAK_PATHS = ['run', 'session'] as const;

// Pod start: a claim is one patch (tens of ms); a cold pod about a second, minutes when pulling.
const START_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120, 300];
// Queue wait: 0 for a call admitted at once; at most CODEMODE_RUN_QUEUE_TIMEOUT_SECONDS (≤ 600).
const WAIT_BUCKETS = [0.001, 0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];
// Output: bytes a program wrote to one stream, before the cap cut what is kept.
const OUTPUT_BUCKETS = [0, 64, 1024, 16 * 1024, 64 * 1024, 256 * 1024, 1024 * 1024, 16 * 1024 * 1024, 256 * 1024 * 1024];
const CALL_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

export interface ServiceMetrics {
  podStarted(start: PodStart, seconds: number): void;
  queueWait(result: QueueWaitResult, seconds: number): void;
  /** A call that found its session busy: how long it waited, and how that ended. */
  sessionWait(result: WaitResult, seconds: number): void;
  output(stdoutBytes: number, stderrBytes: number): void;
  /** A call whose exec stream to its kernel broke after its code was sent, and what came of it. */
  streamBroke(path: (typeof STREAM_BREAK_PATHS)[number], outcome: StreamBreakOutcome): void;
  /** An execute_code call in a session (no SandboxRun): runtime, phase and reason of its outcome. */
  sessionCall(runtime: string, phase: string, reason: string, seconds: number): void;
  /** Where the scrape reads the ready pool pods of this version (the pod informer cache). */
  watchPool(readyPods: () => number): void;
  /** Where the scrape reads the sessions by phase (the SandboxSession informer cache). */
  watchSessions(phases: () => Iterable<string | undefined>): void;
}

/** Counts of each session phase; a session without a phase yet counts as Pending. */
export function countPhases(phases: Iterable<string | undefined>): Record<SessionPhase, number> {
  const counts = Object.fromEntries(SessionPhaseSchema.options.map((p) => [p, 0])) as Record<SessionPhase, number>;
  for (const p of phases) {
    const phase = SessionPhaseSchema.safeParse(p ?? 'Pending');
    if (phase.success) counts[phase.data]++;
  }
  return counts;
}

/** Most bytes one execution's stream counts in codemode_output_bytes (its sum included). */
const MAX_COUNTED_OUTPUT_BYTES = 4 * 1024 ** 3;
/** A finite, non-negative number or nothing (a histogram must never see NaN or a negative). */
const sane = (n: number): number | undefined => (Number.isFinite(n) && n >= 0 ? n : undefined);

export function serviceMetrics(registry: Registry): ServiceMetrics {
  const registers = [registry];
  const podStart = new Histogram({
    name: 'codemode_pod_start_seconds',
    help: 'Time to get a sandbox ready for code, by start: warm (claiming a pool pod, with any wait for a starting one) or cold (creating a pod until it is ready).',
    labelNames: ['start'] as const,
    buckets: START_BUCKETS,
    registers,
  });
  const queueWait = new Histogram({
    name: 'codemode_admission_queue_wait_seconds',
    help: 'Time execute_code calls waited for a run slot on this replica (0 when admitted at once), by result: admitted, refused (queue full or timed out) or cancelled (the caller went away).',
    labelNames: ['result'] as const,
    buckets: WAIT_BUCKETS,
    registers,
  });
  const sessionWait = new Histogram({
    name: 'codemode_session_wait_seconds',
    help: 'Time calls in a session waited while another call ran there (only calls that found their session busy), by result: ran, deadline (waited as long as allowed, did not run), full (too many waiting, did not run) or aborted (the caller went away, did not run).',
    labelNames: ['result'] as const,
    buckets: WAIT_BUCKETS,
    registers,
  });
  const output = new Histogram({
    name: 'codemode_output_bytes',
    help: 'Bytes one execution wrote to stdout or stderr (before the output cap), by stream.',
    labelNames: ['stream'] as const,
    buckets: OUTPUT_BUCKETS,
    registers,
  });
  const sessionCalls = new Counter({
    name: 'codemode_session_calls_total',
    help: 'execute_code calls in a session (they create no SandboxRun), by runtime, phase and reason of the outcome.',
    labelNames: ['runtime', 'phase', 'reason'] as const,
    registers,
  });
  const sessionCallTime = new Histogram({
    name: 'codemode_session_call_duration_seconds',
    help: 'Time of an execute_code call in a session, from the call to its outcome, by runtime.',
    labelNames: ['runtime'] as const,
    buckets: CALL_BUCKETS,
    registers,
  });
  const streamBreaks = new Counter({
    name: 'codemode_kernel_stream_breaks_total',
    help: "Calls whose exec stream to their kernel broke after the code was sent (an API server or kubelet restart, a network break, a relay that died), by path (run: a transient run's pod; session) and outcome: recalled (the outcome read back from the kernel, the caller answered with it) or unknown (nothing could tell; the caller was told the code may have run).",
    labelNames: ['path', 'outcome'] as const,
    registers,
  });
  let readyPods: (() => number) | undefined;
  new Gauge({
    name: 'codemode_warm_pool_ready_pods',
    help: "Ready, unclaimed warm-pool pods of this replica's version (every replica sees the same pods; compare with max(codemode_warm_pool_target_pods)).",
    registers,
    collect(): void {
      if (readyPods) this.set(readyPods());
    },
  });
  let sessionPhases: (() => Iterable<string | undefined>) | undefined;
  new Gauge({
    name: 'codemode_sessions',
    help: 'SandboxSessions in the namespace by phase (Pending and Ready are live; every replica sees the same sessions).',
    labelNames: ['phase'] as const,
    registers,
    collect(): void {
      if (!sessionPhases) return;
      for (const [phase, n] of Object.entries(countPhases(sessionPhases()))) this.set({ phase }, n);
    },
  });
  // Series of closed sets exist from the start (at 0), so rates and alerts see "none" as 0.
  for (const result of QUEUE_WAIT_RESULTS) queueWait.zero({ result });
  for (const result of WAIT_RESULTS) sessionWait.zero({ result });
  for (const start of ['warm', 'cold'] as const) podStart.zero({ start });
  for (const stream of ['stdout', 'stderr'] as const) output.zero({ stream });
  for (const path of STREAM_BREAK_PATHS) for (const outcome of STREAM_BREAK_OUTCOMES) streamBreaks.inc({ path, outcome }, 0);
  sessionCalls.inc({ runtime: 'python', phase: 'Succeeded', reason: Reasons.Succeeded }, 0);

  return {
    podStarted(start, seconds): void {
      const s = sane(seconds);
      if (s !== undefined) podStart.observe({ start }, s);
    },
    queueWait(result, seconds): void {
      const s = sane(seconds);
      if (s !== undefined) queueWait.observe({ result }, s);
    },
    sessionWait(result, seconds): void {
      const s = sane(seconds);
      if (s !== undefined) sessionWait.observe({ result }, s);
    },
    output(stdoutBytes, stderrBytes): void {
      // A session call's byte counts are its kernel's word, and session code can forge them (2^53):
      // one user must not move the team's sums more than a real program that wrote 4 GiB could.
      const out = sane(Math.min(stdoutBytes, MAX_COUNTED_OUTPUT_BYTES));
      const err = sane(Math.min(stderrBytes, MAX_COUNTED_OUTPUT_BYTES));
      if (out !== undefined) output.observe({ stream: 'stdout' }, out);
      if (err !== undefined) output.observe({ stream: 'stderr' }, err);
    },
    streamBroke(path, outcome): void {
      streamBreaks.inc({ path, outcome });
    },
    sessionCall(runtime, phase, reason, seconds): void {
      sessionCalls.inc({ runtime, phase, reason });
      const s = sane(seconds);
      if (s !== undefined) sessionCallTime.observe({ runtime }, s);
    },
    watchPool: (fn): void => void (readyPods = fn),
    watchSessions: (fn): void => void (sessionPhases = fn),
  };
}
