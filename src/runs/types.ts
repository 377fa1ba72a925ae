// The contract between the gateway (MCP tools) and the code that executes runs.
// The gateway never talks to Kubernetes directly for a run: it asks a RunService.
import type { Language, Owner, RunPhase } from '../api/v1alpha1/index.js';
import type { CallSummary } from '../codemode/broker.js';
import type { CallHandler } from '../exec/kernel.js';
import type { DisplayItem } from '../exec/display.js';
import type { StreamBreakOutcome } from '../exec/recall.js';
import type { SessionWaitCause } from '../sessions/service.js';

/** What a caller asks to execute. Already validated by the tool's input schema. */
export interface ExecuteRequest {
  /** Absent: python for a fresh sandbox, the session's language in a session. */
  language?: Language;
  code: string;
  timeoutSeconds?: number;
  stdin?: string;
  /** Run in this SandboxSession's interpreter instead of a fresh pod. */
  session?: string;
  /** The authenticated caller, recorded as spec.owner. */
  owner?: Owner;
  /** Upstream MCP servers the code may call (code mode); absent: all the caller may use. */
  servers?: string[];
  /** The SandboxProfile of a fresh sandbox (absent: the default profile). */
  profile?: string;
}

/** Where code ran: a cold pod, a claimed warm pod, or a session's interpreter. */
export type ExecutionPath = 'cold' | 'warm' | 'session';

/** What the run service reports of calls in a session (src/metrics implements it). */
export interface SessionCallMetrics {
  /** An execute_code call in a session (no SandboxRun): runtime, phase and reason of its outcome. */
  sessionCall(runtime: string, phase: string, reason: string, seconds: number): void;
  /** Bytes the program wrote to each stream. */
  output(stdoutBytes: number, stderrBytes: number): void;
}

/** A piece of output as it streams, before the run finishes. */
export interface OutputChunk {
  stream: 'stdout' | 'stderr';
  text: string;
}

export interface ExecuteOptions {
  /** Called for each output chunk while the run executes (best effort, in order per stream). */
  onOutput?: (chunk: OutputChunk) => void;
  /**
   * Aborted when the caller goes away. The run itself is NOT cancelled by this: it completes and
   * is recorded in its SandboxRun; only the waiting stops.
   */
  signal?: AbortSignal;
  /**
   * A call in a session: told when it waits (at most `waitSeconds` more) for the session to finish
   * another call (`busy`, once) or to start (`starting`).
   */
  onWait?: (waitSeconds: number, why: SessionWaitCause) => void;
}

/** The final, recorded result of a run (mirrors SandboxRun.status). */
export interface RunOutcome {
  /** The SandboxRun that recorded the run; empty for calls in a session (recorded in the session). */
  runName: string;
  /** The session the code ran in, for session calls. */
  session?: string;
  /** repr of the last expression's value, for session calls (like a notebook cell). */
  result?: string;
  namespace: string;
  phase: Extract<RunPhase, 'Succeeded' | 'Failed' | 'TimedOut'>;
  exitCode?: number;
  stdout: string;
  stderr: string;
  /** True when stdout or stderr was cut at the configured cap. */
  truncated: boolean;
  stdoutBytes: number;
  stderrBytes: number;
  durationMs?: number;
  /** Stable reason from src/api (e.g. TimedOut, OOMKilled, NonZeroExit) when not Succeeded. */
  reason?: string;
  /** A sentence the user can act on, when not Succeeded. */
  message?: string;
  /** OOMKilled in a session: the interpreter's memory limit, as its pod says (the tool names profiles with more). */
  memoryLimit?: string;
  /** Nested tool calls the code made (code mode), when it made any. */
  toolCalls?: CallSummary;
  /**
   * Images, HTML and tables the code displayed (plots): returned to the caller only, never
   * stored in a status or record (those keep counts and sizes, see displaySummary).
   */
  display?: DisplayItem[];
}

/** Code mode for one run: answers its code's nested tool calls and counts them (src/codemode RunCalls). */
export interface NestedCalls {
  handle: CallHandler;
  /** The upstream servers the code may call (none: the run needs no channel for calls). */
  allowed(): readonly string[];
  summary(): CallSummary;
}

export interface RunService {
  execute(request: ExecuteRequest, options?: ExecuteOptions): Promise<RunOutcome>;
}

/** What the run engine reports of runs (src/metrics implements it). */
export interface RunMetricsSink {
  /** `start`: where the code ran (absent when it never ran; then `seconds` is 0). */
  runFinished(phase: string, reason: string, runtime: string, seconds: number, start?: ExecutionPath): void;
  runStarted(): void;
  runEnded(): void;
  /** A cold pod's time from its creation request to ready (warm claims are timed by the pool). */
  podStarted?(start: 'cold', seconds: number): void;
  /** Bytes the program wrote to each stream. */
  output?(stdoutBytes: number, stderrBytes: number): void;
  /** A run whose exec stream to its kernel broke after the code was sent: read back, or unknown. */
  streamBroke?(outcome: StreamBreakOutcome): void;
}
