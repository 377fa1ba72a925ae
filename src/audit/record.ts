// The audit record of a call in a session: a SandboxRun created after the call, already finished.
// Transient runs are their own record (their SandboxRun is created before they run); a session
// call goes straight to the session's kernel, so it is recorded afterwards, off its path
// (writer.ts). Pure builders; the record carries who, when, language, outcome and duration, the
// first bytes of the code and sizes of the output — never the output itself.
import { createHash } from 'node:crypto';
import {
  API_VERSION,
  LABEL_OWNER,
  SANDBOXRUN_KIND,
  ownerLabelValue,
  type Language,
  type Owner,
  type RunPhase,
  type AuditCallStatus,
  type SandboxRunStatus,
  type ToolCallCounts,
  type ToolCallsStatus,
  toolCallsStatus,
} from '../api/v1alpha1/index.js';
import { prefixWithinUtf8 } from '../api/v1alpha1/storage.js';
import { ANNOTATION_EXECUTOR, AUDIT_EXECUTOR, LABEL_MANAGED_BY, LABEL_SESSION, MANAGED_BY_VALUE } from '../api/v1alpha1/labels.js';
import { runLabelValue } from '../sandbox/names.js';
import { imageCounts, type DisplayItem } from '../exec/display.js';

/** spec.code of a record keeps this many bytes of the call's code: enough to recognise it, small to store. */
export const AUDIT_CODE_MAX_BYTES = 1024;
/** The whole code's size and SHA-256, so a record can be matched with code kept elsewhere. */
export const ANNOTATION_CODE_BYTES = 'codemode.dev/code-bytes';
export const ANNOTATION_CODE_SHA256 = 'codemode.dev/code-sha256';

/** What a record keeps of a call's outcome (the run engine's RunOutcome has these fields). */
export interface AuditOutcome {
  phase: Extract<RunPhase, 'Succeeded' | 'Failed' | 'TimedOut'>;
  reason?: string;
  exitCode?: number;
  durationMs?: number;
  stdoutBytes: number;
  stderrBytes: number;
  truncated: boolean;
  /** Nested tool calls of the call (code mode), as status.toolCalls. */
  toolCalls?: ToolCallsStatus;
  /** Images the call returned: counts and sizes only. */
  images?: { count: number; bytes: number };
}

/** What the writer keeps of a call until it is written: bounded (the code is cut at enqueue time). */
export interface AuditEntry {
  name: string;
  namespace: string;
  session: string;
  owner?: Owner;
  language: Language;
  timeoutSeconds: number;
  codeHead: string;
  codeBytes: number;
  codeSha256: string;
  startTime: string;
  completionTime: string;
  outcome: AuditOutcome;
}

export interface AuditCall {
  name: string;
  namespace: string;
  session: string;
  owner?: Owner;
  language: Language;
  timeoutSeconds: number;
  code: string;
  startedMs: number;
  endedMs: number;
  outcome: Omit<AuditOutcome, 'toolCalls' | 'images'> & { toolCalls?: ToolCallCounts; display?: readonly DisplayItem[] };
}

/** The entry to keep for a finished call: the code cut to AUDIT_CODE_MAX_BYTES right away. */
export function auditEntry(c: AuditCall): AuditEntry {
  const o = c.outcome;
  const head = prefixWithinUtf8(c.code, AUDIT_CODE_MAX_BYTES);
  // A session call's duration is the kernel's word, and session code can forge the kernel's
  // frames: the record keeps at most what the gateway itself saw pass between start and end.
  const wallMs = Math.max(0, Math.round(c.endedMs - c.startedMs));
  return {
    name: c.name,
    namespace: c.namespace,
    session: c.session,
    ...(c.owner && { owner: c.owner }),
    language: c.language,
    timeoutSeconds: c.timeoutSeconds,
    // spec.code must not be empty; a code that is only cut-off bytes keeps one character.
    codeHead: head === '' ? '#' : head,
    codeBytes: Buffer.byteLength(c.code, 'utf8'),
    codeSha256: createHash('sha256').update(c.code, 'utf8').digest('hex'),
    startTime: new Date(c.startedMs).toISOString(),
    completionTime: new Date(c.endedMs).toISOString(),
    outcome: {
      phase: o.phase,
      truncated: o.truncated,
      stdoutBytes: o.stdoutBytes,
      stderrBytes: o.stderrBytes,
      ...(o.reason !== undefined && { reason: o.reason }),
      ...(o.exitCode !== undefined && { exitCode: o.exitCode }),
      ...(o.durationMs !== undefined && { durationMs: Math.min(Math.max(0, Math.round(o.durationMs)), wallMs) }),
      ...(o.toolCalls !== undefined && o.toolCalls.calls > 0 && { toolCalls: toolCallsStatus(o.toolCalls) }),
      ...imageCounts(o.display),
    },
  };
}

/** The SandboxRun to create (the API server ignores status on create: auditStatus follows). */
export function auditRunBody(e: AuditEntry, ttlSecondsAfterFinished?: number): object {
  return {
    apiVersion: API_VERSION,
    kind: SANDBOXRUN_KIND,
    metadata: {
      name: e.name,
      namespace: e.namespace,
      labels: {
        [LABEL_MANAGED_BY]: MANAGED_BY_VALUE,
        [LABEL_SESSION]: runLabelValue(e.session),
        ...(e.owner && { [LABEL_OWNER]: ownerLabelValue(e.owner.user) }),
      },
      annotations: {
        // No replica executes or claims it (run-decision.ts): the call already ran.
        [ANNOTATION_EXECUTOR]: AUDIT_EXECUTOR,
        [ANNOTATION_CODE_BYTES]: String(e.codeBytes),
        [ANNOTATION_CODE_SHA256]: e.codeSha256,
      },
    },
    spec: {
      ...(e.owner && { owner: e.owner }),
      language: e.language,
      code: e.codeHead,
      timeoutSeconds: e.timeoutSeconds,
      session: e.session,
      ...(ttlSecondsAfterFinished !== undefined && { ttlSecondsAfterFinished }),
    },
  };
}

/**
 * The record's terminal status. No message: a session call's message can quote the program's
 * exception, and a record never carries what the program printed — only sizes.
 */
export function auditStatus(e: AuditEntry): SandboxRunStatus {
  return { observedGeneration: 1, startTime: e.startTime, completionTime: e.completionTime, ...e.outcome };
}

/** Pure: one call of a record that covers several (status.calls). */
export function auditCallStatus(e: AuditEntry): AuditCallStatus {
  const o = e.outcome;
  return {
    name: e.name,
    startTime: e.startTime,
    completionTime: e.completionTime,
    ...(o.durationMs !== undefined && { durationMs: o.durationMs }),
    phase: o.phase,
    ...(o.reason !== undefined && { reason: o.reason }),
    ...(o.exitCode !== undefined && { exitCode: o.exitCode }),
    stdoutBytes: o.stdoutBytes,
    stderrBytes: o.stderrBytes,
    ...(o.truncated && { truncated: true }),
    codeBytes: e.codeBytes,
    codeSha256: e.codeSha256,
    ...(o.toolCalls !== undefined && { toolCalls: o.toolCalls.calls }),
    ...(o.images !== undefined && { images: o.images.count }),
  };
}

/** Pure: the nested-call counts of several calls as one status.toolCalls (servers summed by name). */
function sumToolCalls(all: readonly ToolCallsStatus[]): ToolCallsStatus | undefined {
  if (all.length === 0) return undefined;
  // No prototype: a server may be named "constructor" (a Kubernetes name), for which ??= on a
  // plain object found Object and added the server's calls to it.
  const servers = Object.create(null) as ToolCallCounts['servers'];
  for (const t of all)
    for (const s of t.servers ?? []) {
      const v = (servers[s.name] ??= { calls: 0, errors: 0 });
      v.calls += s.calls;
      v.errors += s.errors;
    }
  const sum = (f: (t: ToolCallsStatus) => number): number => all.reduce((n, t) => n + f(t), 0);
  return toolCallsStatus({ calls: sum((t) => t.calls), errors: sum((t) => t.errors), upstreamWaitMs: sum((t) => t.upstreamWaitMs), servers });
}

/**
 * Pure: the terminal status of a record of calls of one session, in the order they ran (at most
 * MAX_AUDIT_CALLS). One call: auditStatus. Several: status.calls lists each, and the record's own
 * fields sum them up — the first start, the last completion, summed durations and sizes, the
 * outcome of the first call that did not succeed (else Succeeded).
 */
export function auditBatchStatus(entries: readonly AuditEntry[]): SandboxRunStatus {
  const [first] = entries;
  if (first === undefined) throw new Error('auditBatchStatus: no entries');
  if (entries.length === 1) return auditStatus(first);
  const outcomes = entries.map((e) => e.outcome);
  const failed = outcomes.find((o) => o.phase !== 'Succeeded');
  // Byte counts are the kernel's word too (up to 2^53 each): their sum stays an exact integer,
  // or the status would not match its own schema (z.int()).
  const sum = (f: (o: AuditOutcome) => number | undefined): number =>
    Math.min(
      Number.MAX_SAFE_INTEGER,
      outcomes.reduce((n, o) => n + (f(o) ?? 0), 0),
    );
  const toolCalls = sumToolCalls(outcomes.flatMap((o) => (o.toolCalls ? [o.toolCalls] : [])));
  const images = outcomes.some((o) => o.images) ? { count: sum((o) => o.images?.count), bytes: sum((o) => o.images?.bytes) } : undefined;
  return {
    observedGeneration: 1,
    startTime: first.startTime,
    completionTime: entries[entries.length - 1]?.completionTime ?? first.completionTime,
    phase: failed?.phase ?? 'Succeeded',
    ...(failed?.reason !== undefined && { reason: failed.reason }),
    ...(failed?.exitCode !== undefined && { exitCode: failed.exitCode }),
    durationMs: sum((o) => o.durationMs),
    stdoutBytes: sum((o) => o.stdoutBytes),
    stderrBytes: sum((o) => o.stderrBytes),
    truncated: outcomes.some((o) => o.truncated),
    ...(toolCalls && { toolCalls }),
    ...(images && { images }),
    calls: entries.map(auditCallStatus),
  };
}
