// SandboxRun: one execution of a piece of code in a fresh sandbox pod. These zod schemas are the
// single source of truth: the CRD in crds/ is generated from them (crd.ts), and the controller
// parses what it reads from the API server with them.
import { z } from 'zod';
import { ConditionSchema, MAX_CONDITION_MESSAGE } from './conditions.js';
import { OwnerSchema } from './owner.js';

export const GROUP = 'codemode.dev';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;
export const SANDBOXRUN_KIND = 'SandboxRun';
export const SANDBOXRUN_PLURAL = 'sandboxruns';

/** Upper bound of spec.code in bytes. The admin config may lower it, never raise it. */
export const MAX_CODE_BYTES_HARD = 262144;
/** Upper bound of spec.stdin in bytes. */
export const MAX_STDIN_BYTES = 262144;
/**
 * Upper bound of status.stdout and status.stderr (each) in UTF-8 bytes. Code, stdin and both
 * outputs at their bounds make 1 MiB, inside etcd's 1.5 MiB request limit; what JSON escaping or
 * large annotations add is taken from the stored outputs when the status is written (storage.ts).
 */
export const MAX_OUTPUT_BYTES_HARD = 262144;
export const MAX_TIMEOUT_SECONDS_HARD = 3600;
/** spec.timeoutSeconds of a SandboxRun that leaves it out (the CRD's default; execute_code writes its own). */
export const DEFAULT_RUN_TIMEOUT_SECONDS = 30;
/** Longest a finished run may be kept (one week): bounds how long a full namespace stays full. */
export const MAX_TTL_SECONDS_AFTER_FINISHED = 604800;
/** Bounds of the short texts the controller writes (same as metav1.Condition's). */
export const MAX_REASON_LENGTH = 1024;
export const MAX_MESSAGE_LENGTH = MAX_CONDITION_MESSAGE;
export const MAX_CONDITIONS = 8;

/**
 * Kubernetes quantity with the suffixes the operator understands (m, k, Ki, Mi, Gi, Ti, M, G, T).
 * Narrower than the API server's grammar on purpose (no exponents, no sign), and RE2-safe so the
 * API server can enforce it too.
 */
export const QUANTITY_PATTERN = /^([0-9]+(\.[0-9]+)?|\.[0-9]+)(m|k|Ki|Mi|Gi|Ti|M|G|T)?$/;
/**
 * QUANTITY_PATTERN without zero (a non-zero digit before or after the point): the kubelet reads a
 * limit of 0 as no limit at all (no memory cgroup limit, no CPU quota), so a run asking for
 * `memory: "0"` would pass every "at most the maximum" check and get an unbounded sandbox.
 */
export const POSITIVE_QUANTITY_PATTERN = /^([0-9]*[1-9][0-9]*(\.[0-9]+)?|[0-9]*\.[0-9]*[1-9][0-9]*)(m|k|Ki|Mi|Gi|Ti|M|G|T)?$/;
const QUANTITY_HINT = 'a Kubernetes quantity above zero such as 500m, 1, 1.5, 512Mi or 2Gi';

/**
 * The least memory a sandbox may be given (limit or request): its interpreter needs more to start.
 * Mostly it catches a slip of the suffix: `512m` is half a byte, `512` bytes, `512k` half a MB.
 */
export const MIN_MEMORY = '16Mi';
export const MIN_MEMORY_BYTES = 16 * 2 ** 20;
export const MIN_MEMORY_HINT = `at least ${MIN_MEMORY}, e.g. 512Mi (a lowercase m means thousandths: 512m is half a byte)`;

export const LanguageSchema = z.enum(['python', 'bash', 'sh', 'node', 'javascript']);
export type Language = z.infer<typeof LanguageSchema>;
/** What actually runs: `javascript` is an alias of `node`. */
export type Runtime = 'python' | 'bash' | 'sh' | 'node';

export function normalizeLanguage(l: Language): Runtime {
  return l === 'javascript' ? 'node' : l;
}

export const RunPhaseSchema = z.enum(['Pending', 'Running', 'Succeeded', 'Failed', 'TimedOut']);
export type RunPhase = z.infer<typeof RunPhaseSchema>;

const TERMINAL_PHASES: ReadonlySet<RunPhase> = new Set(['Succeeded', 'Failed', 'TimedOut']);

/** A terminal phase never changes again: the controller only deletes the run after its TTL. */
export function isTerminalPhase(p: RunPhase | undefined): boolean {
  return p !== undefined && TERMINAL_PHASES.has(p);
}

function utf8Bytes(s: string): number {
  return Buffer.byteLength(s, 'utf8');
}

/**
 * A string bounded in UTF-8 bytes, checked by zod and by the API server: maxLength counts
 * characters (up to 4 bytes each), so a CEL rule bounds the bytes etcd has to store.
 */
function byteBoundedString(maxBytes: number) {
  return z
    .string()
    .max(maxBytes)
    .refine((s) => utf8Bytes(s) <= maxBytes, { error: `must be at most ${maxBytes} bytes (UTF-8)` })
    .meta({
      'x-kubernetes-validations': [{ rule: `size(bytes(self)) <= ${maxBytes}`, message: `must be at most ${maxBytes} bytes (UTF-8)` }],
    });
}

export const QuantitySchema = z
  .string()
  .max(64)
  .regex(POSITIVE_QUANTITY_PATTERN, { error: `must be ${QUANTITY_HINT}` });

export const RunResourcesSchema = z.object({
  cpu: QuantitySchema.optional().describe(
    "CPU limit of the run in cores, e.g. 500m or 1. Must not exceed the administrator's maximum; defaults to the administrator's default.",
  ),
  memory: QuantitySchema.optional().describe(
    "Memory limit of the run, e.g. 256Mi or 1Gi. Must not exceed the administrator's maximum; defaults to the administrator's default.",
  ),
});

/** A SandboxProfile's name: a DNS-1123 label (a pod label value, part of pool pod names). */
export const PROFILE_NAME_PATTERN = /^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$/;
export const ProfileRefSchema = z
  .string()
  .max(40)
  .regex(PROFILE_NAME_PATTERN, { error: 'must be the name of a SandboxProfile (lowercase letters, digits and -, at most 40 characters)' });

// A plain (non-strict) object of optional, additive fields: new optional fields such as
// `session` or `profile` can be added later without invalidating stored objects, and older
// controllers simply ignore them. No discriminated unions, so the CRD stays structural.
const SPEC_IMMUTABLE = 'cannot be changed: a SandboxRun executes its spec once; create a new SandboxRun to run other code';
export const SandboxRunSpecSchema = z
  .object({
    language: LanguageSchema.default('python').describe('Language of the code: python, bash, sh, node or javascript (an alias of node).'),
    code: byteBoundedString(MAX_CODE_BYTES_HARD)
      .min(1)
      .describe(
        `Source code to execute. At most ${MAX_CODE_BYTES_HARD} bytes (UTF-8); the administrator may set a lower limit. The run executes it once; later changes have no effect.`,
      ),
    timeoutSeconds: z
      .int()
      .min(1)
      .max(MAX_TIMEOUT_SECONDS_HARD)
      .default(DEFAULT_RUN_TIMEOUT_SECONDS)
      .describe("Wall-clock limit of the execution in seconds (1-3600). The controller enforces the administrator's maximum, which may be lower."),
    stdin: byteBoundedString(MAX_STDIN_BYTES)
      .optional()
      .describe(`Data fed to the program's standard input (at most ${MAX_STDIN_BYTES} bytes). Empty stdin when omitted.`),
    resources: RunResourcesSchema.optional().describe("Resource limits of the sandbox container. Each must be within the administrator's bounds."),
    session: z
      .string()
      .max(253)
      .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/, {
        error: 'must be the name of a SandboxSession in the same namespace',
      })
      .optional()
      .describe(
        'Name of a SandboxSession in the same namespace to run the code in, keeping its interpreter state. Its language must match. Without it, the code runs in a fresh single-use pod.',
      ),
    profile: ProfileRefSchema.optional().describe(
      "Name of a SandboxProfile in the same namespace: the kind of sandbox (image, resources, warm pool). Default: the administrator's default profile. Ignored with session (the session's profile applies).",
    ),
    owner: OwnerSchema.optional(),
    ttlSecondsAfterFinished: z
      .int()
      .min(0)
      .max(MAX_TTL_SECONDS_AFTER_FINISHED)
      .optional()
      .describe(
        `Seconds after completion before the SandboxRun (and its pod) is deleted (0-${MAX_TTL_SECONDS_AFTER_FINISHED}). Defaults to the administrator's setting (3600); the administrator's maximum may be lower.`,
      ),
  })
  // Immutable, for everyone: a run executes the spec it had when it was claimed or started, so an
  // edit could only change what a Queued run (someone else's, say) executes, or what its record
  // claims was executed.
  .meta({ 'x-kubernetes-validations': [{ rule: 'self == oldSelf', message: SPEC_IMMUTABLE }] });
export type SandboxRunSpec = z.infer<typeof SandboxRunSpecSchema>;
/** What a creator must provide (defaults not yet applied). */
export type SandboxRunSpecInput = z.input<typeof SandboxRunSpecSchema>;

const count = z.int().min(0);
const timestamp = z.iso.datetime({ offset: true }).max(64);

/** Upstream servers listed by name in status.toolCalls; a run calling more keeps the busiest. */
export const MAX_TOOL_CALL_SERVERS = 50;

export const ToolCallsStatusSchema = z
  .object({
    calls: count.describe('Tool calls the code made to upstream MCP servers (code mode), refused ones included.'),
    errors: count.describe('Of those, calls that failed: refused, timed out, over a limit, or an error from the tool.'),
    upstreamWaitMs: count.describe('Milliseconds during which at least one call was waiting on an upstream (part of durationMs).'),
    servers: z
      .array(
        z
          .object({
            name: z.string().min(1).max(253).describe('The UpstreamServer, or "(denied)" for calls naming a server the run may not use.'),
            calls: count.describe('Tool calls to this server.'),
            errors: count.describe('Of those, calls that failed.'),
          })
          .describe('The calls to one upstream server.'),
      )
      .max(MAX_TOOL_CALL_SERVERS)
      .optional()
      .meta({ description: 'Calls and errors per upstream server.', 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['name'] }),
  })
  .describe("Nested tool calls from the run's code (code mode): counts only, never arguments or results.");
export type ToolCallsStatus = z.infer<typeof ToolCallsStatusSchema>;

/** What a run's nested calls amounted to, as the broker counts them (src/codemode CallSummary). */
export interface ToolCallCounts {
  calls: number;
  errors: number;
  upstreamWaitMs: number;
  servers: Record<string, { calls: number; errors: number }>;
}

/** Pure: the counts as status.toolCalls — servers by name, the busiest MAX_TOOL_CALL_SERVERS. */
export function toolCallsStatus(c: ToolCallCounts): ToolCallsStatus {
  const servers = Object.entries(c.servers)
    .sort(([a, x], [b, y]) => y.calls - x.calls || a.localeCompare(b))
    .slice(0, MAX_TOOL_CALL_SERVERS)
    .map(([name, v]) => ({ name, calls: v.calls, errors: v.errors }));
  return { calls: c.calls, errors: c.errors, upstreamWaitMs: Math.max(0, Math.round(c.upstreamWaitMs)), ...(servers.length > 0 && { servers }) };
}

/** Session calls one audit record lists at most (src/audit: the writer starts another record after them). */
export const MAX_AUDIT_CALLS = 100;

export const AuditCallStatusSchema = z
  .object({
    name: z.string().min(1).max(253).describe('The name the call was recorded under (a record of one call has it as its own name).'),
    startTime: timestamp.describe('When the call started (RFC 3339).'),
    completionTime: timestamp.describe('When the call ended (RFC 3339).'),
    durationMs: count.optional().describe('Execution time of the code in milliseconds.'),
    phase: z.enum(['Succeeded', 'Failed', 'TimedOut']).describe('Outcome of the call.'),
    reason: z.string().max(MAX_REASON_LENGTH).optional().describe('Stable CamelCase reason of a call that did not succeed, e.g. Exception.'),
    exitCode: z.int().optional().describe('Exit code, for calls that report one.'),
    stdoutBytes: count.describe('Size of its standard output in bytes.'),
    stderrBytes: count.describe('Size of its standard error in bytes.'),
    truncated: z.boolean().optional().describe('True when its output was cut at the cap.'),
    codeBytes: count.describe('Size of its code in bytes.'),
    codeSha256: z
      .string()
      .length(64)
      .regex(/^[0-9a-f]{64}$/)
      .describe('SHA-256 of its code (hex), to match the call with code kept elsewhere.'),
    toolCalls: count.optional().describe('Nested tool calls its code made (code mode).'),
    images: count.optional().describe('Images it returned.'),
  })
  .describe('One session call of an audit record that covers several.');
export type AuditCallStatus = z.infer<typeof AuditCallStatusSchema>;

export const SandboxRunStatusSchema = z.object({
  phase: RunPhaseSchema.optional().describe('Lifecycle phase: Pending, Running, Succeeded, Failed or TimedOut. The last three are terminal.'),
  conditions: z
    .array(ConditionSchema.describe('One observation of the run, in the metav1.Condition format.'))
    .max(MAX_CONDITIONS)
    .optional()
    .meta({
      description: 'Latest observations of the run: Ready (sandbox pod ready) and Complete.',
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['type'],
    }),
  observedGeneration: count.optional().describe('The metadata.generation this status was computed from.'),
  podName: z.string().max(253).optional().describe('Name of the sandbox pod that runs the code.'),
  exitCode: z.int().optional().describe('Exit code of the program, when it ran to completion.'),
  stdout: byteBoundedString(MAX_OUTPUT_BYTES_HARD)
    .optional()
    .describe(`Standard output of the program, cut at the administrator's cap (at most ${MAX_OUTPUT_BYTES_HARD} bytes; see truncated).`),
  stderr: byteBoundedString(MAX_OUTPUT_BYTES_HARD)
    .optional()
    .describe(`Standard error of the program, cut at the administrator's cap (at most ${MAX_OUTPUT_BYTES_HARD} bytes; see truncated).`),
  stdoutBytes: count.optional().describe('Size of the complete standard output in bytes, before any cut.'),
  stderrBytes: count.optional().describe('Size of the complete standard error in bytes, before any cut.'),
  truncated: z.boolean().optional().describe('True when stdout or stderr was cut at the cap.'),
  startTime: timestamp.optional().describe('When the code started executing (RFC 3339).'),
  completionTime: timestamp.optional().describe('When the run reached a terminal phase (RFC 3339).'),
  durationMs: count.optional().describe('Execution time of the code in milliseconds.'),
  reason: z.string().max(MAX_REASON_LENGTH).optional().describe('Stable CamelCase reason of the current phase, e.g. NonZeroExit or OOMKilled.'),
  message: z.string().max(MAX_MESSAGE_LENGTH).optional().describe('Human-readable explanation of the current phase.'),
  toolCalls: ToolCallsStatusSchema.optional(),
  images: z
    .object({
      count: count.describe('Images the code displayed (plots, display()) and the caller received.'),
      bytes: count.describe('Their decoded size in bytes.'),
    })
    .optional()
    .describe('Images the run returned: counts and sizes only, the images themselves are never stored.'),
  calls: z
    .array(AuditCallStatusSchema)
    .max(MAX_AUDIT_CALLS)
    .optional()
    .describe(
      "Audit records of session calls only: the calls this record covers, when it covers more than one (calls of one session written together). The record's own fields then sum them up: the first start, the last completion, the summed duration and sizes, and the phase, reason and exit code of the first call that did not succeed.",
    ),
});
export type SandboxRunStatus = z.infer<typeof SandboxRunStatusSchema>;

const OwnerReferenceSchema = z
  .object({
    apiVersion: z.string(),
    kind: z.string(),
    name: z.string(),
    uid: z.string(),
    controller: z.boolean().optional(),
    blockOwnerDeletion: z.boolean().optional(),
  })
  .loose();

// Loose: the API server owns metadata; we read the fields we need and keep the rest intact.
export const ObjectMetaSchema = z
  .object({
    name: z.string().min(1),
    namespace: z.string().optional(),
    uid: z.string().optional(),
    generation: z.int().optional(),
    resourceVersion: z.string().optional(),
    labels: z.record(z.string(), z.string()).optional(),
    annotations: z.record(z.string(), z.string()).optional(),
    creationTimestamp: z.string().optional(),
    deletionTimestamp: z.string().optional(),
    ownerReferences: z.array(OwnerReferenceSchema).optional(),
  })
  .loose();

export const SandboxRunSchema = z.object({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal(SANDBOXRUN_KIND),
  metadata: ObjectMetaSchema,
  spec: SandboxRunSpecSchema,
  status: SandboxRunStatusSchema.optional(),
});
export type SandboxRun = z.infer<typeof SandboxRunSchema>;

export type ParseSandboxRunResult = { ok: true; run: SandboxRun } | { ok: false; message: string };

/** Validates an object read from the API server (or built by a client) and applies defaults. */
export function parseSandboxRun(obj: unknown): ParseSandboxRunResult {
  const result = SandboxRunSchema.safeParse(obj, { reportInput: true });
  if (result.success) return { ok: true, run: result.data };
  return { ok: false, message: `Invalid SandboxRun: ${describeIssues(result.error.issues)}.` };
}

// Readable validation messages: "<path> <problem and what is allowed>", used for the API
// (parseSandboxRun) and for configuration errors, instead of zod's developer-oriented text.
const NOUNS: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  int: 'an integer',
  boolean: 'true or false',
  object: 'an object',
  array: 'a list',
};

function sizeUnit(origin: string): string {
  if (origin === 'string') return ' characters';
  if (origin === 'array' || origin === 'set') return ' items';
  return '';
}

/** One problem as a phrase, e.g. `must be at most 3600`, `is required (an integer)`. */
export function describeIssue(issue: z.core.$ZodIssue): string {
  // `input` is only reported with `reportInput: true`; otherwise fall back on zod's wording.
  const missing = 'input' in issue ? issue.input === undefined : /received undefined$/.test(issue.message);
  switch (issue.code) {
    case 'invalid_type': {
      const noun = NOUNS[issue.expected] ?? issue.expected;
      return missing ? `is required (${noun})` : `must be ${noun}`;
    }
    case 'invalid_value': {
      const allowed = issue.values.map((v) => JSON.stringify(v)).join(', ');
      const rule = issue.values.length === 1 ? `must be ${allowed}` : `must be one of ${allowed}`;
      return missing ? `is required and ${rule}` : rule;
    }
    case 'too_small': {
      if (issue.origin === 'string' && Number(issue.minimum) === 1) return 'must not be empty';
      const op = issue.inclusive === false ? 'greater than' : 'at least';
      return `must be ${op} ${String(issue.minimum)}${sizeUnit(issue.origin)}`;
    }
    case 'too_big': {
      const op = issue.inclusive === false ? 'less than' : 'at most';
      return `must be ${op} ${String(issue.maximum)}${sizeUnit(issue.origin)}`;
    }
    case 'invalid_format':
      if (issue.format === 'datetime') return 'must be an RFC 3339 date-time such as 2026-01-02T15:04:05Z';
      // Every regex in src/api and src/config carries its own readable message.
      return issue.format === 'regex' ? issue.message : `must be a valid ${issue.format}`;
    default:
      return issue.message;
  }
}

export function formatIssuePath(path: ReadonlyArray<PropertyKey>): string {
  let out = '';
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else out += out === '' ? String(key) : `.${String(key)}`;
  }
  return out === '' ? '(object)' : out;
}

/** All problems as one sentence body: `spec.code must not be empty; spec.language must be ...`. */
export function describeIssues(issues: ReadonlyArray<z.core.$ZodIssue>): string {
  return issues.map((i) => `${formatIssuePath(i.path)} ${describeIssue(i)}`).join('; ');
}
