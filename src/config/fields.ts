// The configuration surface: every environment variable, its default, what it means and what
// values are allowed. loadConfig parses with these schemas and the README table is generated
// from them, so docs and behaviour cannot disagree.
import { z } from 'zod';
import {
  MAX_CODE_BYTES_HARD,
  MAX_OUTPUT_BYTES_HARD,
  MAX_TIMEOUT_SECONDS_HARD,
  MAX_TTL_SECONDS_AFTER_FINISHED,
  MIN_MEMORY,
  MIN_MEMORY_BYTES,
  MIN_MEMORY_HINT,
  QUANTITY_PATTERN,
  SANDBOX_CHECKS,
  ECOSYSTEMS,
  POLICY_ENTRY,
  WorkspaceMediumSchema,
  type Ecosystem,
} from '../api/v1alpha1/index.js';
import { parseQuantity } from './quantity.js';

export interface FieldDoc {
  env: string;
  /** Default as written in the docs; '' when there is none. */
  default: string;
  description: string;
  /** What is allowed, appended to every error about this variable. */
  allowed: string;
}

// Helm renders unset values as empty strings: blank means "use the default".
function blankToUndefined(v: unknown): unknown {
  if (typeof v !== 'string') return v;
  const trimmed = v.trim();
  return trimmed === '' ? undefined : trimmed;
}

function docOf(doc: FieldDoc & { docDefault?: string }): FieldDoc {
  return { env: doc.env, default: doc.docDefault ?? doc.default, description: doc.description, allowed: doc.allowed };
}

/** A variable with a default: always present in the parsed result. */
function field<S extends z.ZodType<unknown, string>>(doc: FieldDoc, schema: S) {
  return { doc: docOf(doc), schema: z.preprocess(blankToUndefined, schema.prefault(doc.default as z.input<S>)) };
}

/** A variable without a default: undefined when unset or blank. */
function optionalField<S extends z.ZodType<unknown, string>>(doc: FieldDoc & { docDefault?: string }, schema: S) {
  return { doc: docOf(doc), schema: z.preprocess(blankToUndefined, schema.optional()) };
}

/** A user or group name prefix: no separator of the lists that name users and groups, no name Kubernetes reserves. */
const identityPrefix = z
  .string()
  .max(64, { error: 'must be at most 64 characters' })
  .regex(/^[^\s,\p{Cc}]+$/u, { error: 'must not contain spaces, commas or control characters' })
  .refine((p) => !p.startsWith('system:'), { error: 'must not start with system: (names Kubernetes reserves)' });

const int = (min: number, max: number) =>
  z
    .string()
    .regex(/^[0-9]+$/, { error: 'must be a whole number' })
    .transform(Number)
    .pipe(z.int().min(min).max(max));

const quantity = z
  .string()
  .regex(QUANTITY_PATTERN, { error: 'must be a Kubernetes quantity such as 500m, 1, 512Mi or 2Gi' })
  // Checks run even after the pattern failed; that case is already reported by the regex.
  .refine((q) => !QUANTITY_PATTERN.test(q) || parseQuantity(q) > 0, { error: 'must be greater than zero' });

const dnsLabel = z
  .string()
  .max(63)
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, {
    error: 'must be a DNS-1123 label: lowercase letters, digits and -, starting and ending alphanumeric',
  });

const httpUrl = z.string().regex(/^https?:\/\/[^\s]+$/, { error: 'must be an http(s) URL' });
const cidr = z
  .string()
  .regex(/^(?:[0-9]{1,3}(?:\.[0-9]{1,3}){3}\/[0-9]{1,2}|[0-9a-fA-F:]+\/[0-9]{1,3})$/, { error: 'must be a CIDR such as 0.0.0.0/0 or 10.0.0.0/8' });

const image = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._\-/:@]*$/, {
  error: 'must be a container image reference such as registry.example.com/sandbox:v1',
});

function commaList<T extends z.ZodType<string, string>>(item: T) {
  return z
    .string()
    .transform((s) =>
      s
        .split(',')
        .map((p) => p.trim())
        .filter((p) => p !== ''),
    )
    .pipe(z.array(item));
}

const host = z
  .string()
  .transform((h) => h.toLowerCase())
  .pipe(
    z.string().regex(/^(\[[0-9a-f:.]+\]|[a-z0-9]([-a-z0-9.]*[a-z0-9])?)$/, {
      error: 'must be a host name or IP address without scheme or port, e.g. mcp.example.com or [::1]',
    }),
  );

const ORIGIN_ERROR = 'must be an origin: scheme, host and optional port, no path (e.g. https://app.example.com)';
const origin = z.string().transform((o, ctx) => {
  const trimmed = o.replace(/\/$/, '');
  let url: URL;
  try {
    url = new URL(trimmed);
  } catch {
    ctx.addIssue({ code: 'custom', message: ORIGIN_ERROR, input: o });
    return z.NEVER;
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.origin !== trimmed.toLowerCase()) {
    ctx.addIssue({ code: 'custom', message: ORIGIN_ERROR, input: o });
    return z.NEVER;
  }
  return url.origin;
});

const ONLY_BASE_URL = 'give only the scheme, host and optional port, e.g. https://mcp.example.com';

/** Why `value` (an http(s) URL) is not a base URL the gateway can append /mcp to, or undefined. */
function baseUrlProblem(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return undefined; // reported by z.url
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined; // reported by z.url
  if (url.username !== '' || url.password !== '') return 'must not contain a user name or password';
  if (url.pathname !== '/') return `must not have a path (it has ${url.pathname}); the gateway adds /mcp itself`;
  // Checked on the text: an empty query or fragment ("https://x/?") leaves URL.search and URL.hash empty.
  if (/[?#]/.test(value)) return 'must not have a query or fragment';
  return undefined;
}

/** The gateway's public base URL: the metadata and 401 answers append /mcp and /.well-known/... to it. */
const baseUrl = z.url({ protocol: /^https?$/, error: 'must be an http or https URL' }).superRefine((value, ctx) => {
  const problem = baseUrlProblem(value);
  if (problem !== undefined) ctx.addIssue({ code: 'custom', message: `${problem}: ${ONLY_BASE_URL}`, input: value });
});

const timeoutAllowed = `an integer from 1 to ${MAX_TIMEOUT_SECONDS_HARD}`;
const quantityAllowed = 'a Kubernetes quantity greater than zero (suffixes m, k, Ki, Mi, Gi, Ti, M, G, T)';

function quantityField(env: string, def: string, description: string) {
  return field({ env, default: def, description, allowed: quantityAllowed }, quantity);
}

/** A sandbox's memory: a quantity of at least MIN_MEMORY. */
function memoryField(env: string, def: string, description: string) {
  const memory = quantity.refine((q) => !QUANTITY_PATTERN.test(q) || parseQuantity(q) === 0 || parseQuantity(q) >= MIN_MEMORY_BYTES, {
    error: `must be ${MIN_MEMORY_HINT}`,
  });
  return field({ env, default: def, description, allowed: `a Kubernetes quantity of at least ${MIN_MEMORY}` }, memory);
}

function imageField(env: string, runtime: string) {
  return optionalField(
    {
      env,
      default: '',
      docDefault: 'value of CODEMODE_SANDBOX_IMAGE',
      description: `Sandbox image for ${runtime} runs.`,
      allowed: 'a container image reference',
    },
    image,
  );
}

/** How a result is written into a tool reply's text (src/gateway/tools/result-format.ts). */
export const RESULT_FORMATS = ['text', 'json', 'toon'] as const;
export type ResultFormat = (typeof RESULT_FORMATS)[number];

export const FIELDS = {
  namespace: field(
    {
      env: 'CODEMODE_NAMESPACE',
      default: 'codemode',
      description: 'Namespace where the gateway creates SandboxRuns and their pods; the controller watches only this namespace.',
      allowed: 'a DNS-1123 label (at most 63 characters)',
    },
    dnsLabel,
  ),
  sandboxImage: field(
    {
      env: 'CODEMODE_SANDBOX_IMAGE',
      default: 'codemode.local/sandbox:v1',
      description: 'Default sandbox image for every runtime.',
      allowed: 'a container image reference',
    },
    image,
  ),
  imagePython: imageField('CODEMODE_IMAGE_PYTHON', 'python'),
  imageBash: imageField('CODEMODE_IMAGE_BASH', 'bash'),
  imageSh: imageField('CODEMODE_IMAGE_SH', 'sh'),
  imageNode: imageField('CODEMODE_IMAGE_NODE', 'node (and javascript)'),
  imagePullPolicy: field(
    {
      env: 'CODEMODE_IMAGE_PULL_POLICY',
      default: 'IfNotPresent',
      description: 'imagePullPolicy of sandbox pods.',
      allowed: 'Always, IfNotPresent or Never',
    },
    z.enum(['Always', 'IfNotPresent', 'Never']),
  ),
  defaultTimeoutSeconds: field(
    {
      env: 'CODEMODE_DEFAULT_TIMEOUT_SECONDS',
      default: '30',
      description:
        'Timeout of an execute_code call that does not ask for one. A SandboxRun created with kubectl that leaves spec.timeoutSeconds out gets the CRD default, 30 (refused with a message saying so where CODEMODE_MAX_TIMEOUT_SECONDS is lower).',
      allowed: `${timeoutAllowed}, not above CODEMODE_MAX_TIMEOUT_SECONDS`,
    },
    int(1, MAX_TIMEOUT_SECONDS_HARD),
  ),
  maxTimeoutSeconds: field(
    {
      env: 'CODEMODE_MAX_TIMEOUT_SECONDS',
      default: '300',
      description: 'Largest timeout a run may ask for.',
      allowed: `${timeoutAllowed}, not below CODEMODE_DEFAULT_TIMEOUT_SECONDS`,
    },
    int(1, MAX_TIMEOUT_SECONDS_HARD),
  ),
  maxCodeBytes: field(
    {
      env: 'CODEMODE_MAX_CODE_BYTES',
      default: String(MAX_CODE_BYTES_HARD),
      description: 'Largest accepted code size in bytes (UTF-8).',
      allowed: `an integer from 1 to ${MAX_CODE_BYTES_HARD} (the API's hard limit)`,
    },
    int(1, MAX_CODE_BYTES_HARD),
  ),
  outputCapChars: field(
    {
      env: 'CODEMODE_OUTPUT_CAP_CHARS',
      default: '50000',
      description: 'Characters of stdout and of stderr (each) kept in the result and in SandboxRun status (CODEMODE_OUTPUT_CAP_BYTES applies too).',
      allowed: 'an integer from 1 to 262144',
    },
    int(1, 262144),
  ),
  defaultCpu: quantityField('CODEMODE_DEFAULT_CPU', '1', 'CPU limit of a run that does not ask for one.'),
  defaultMemory: memoryField('CODEMODE_DEFAULT_MEMORY', '512Mi', 'Memory limit of a run that does not ask for one.'),
  maxCpu: quantityField('CODEMODE_MAX_CPU', '2', 'Largest CPU limit a run may ask for.'),
  maxMemory: memoryField('CODEMODE_MAX_MEMORY', '2Gi', 'Largest memory limit a run may ask for.'),
  cpuRequest: quantityField('CODEMODE_CPU_REQUEST', '100m', 'CPU request of sandbox pods (capped at the limit).'),
  memoryRequest: memoryField('CODEMODE_MEMORY_REQUEST', '128Mi', 'Memory request of sandbox pods (capped at the limit).'),
  ephemeralStorageLimit: quantityField(
    'CODEMODE_EPHEMERAL_STORAGE_LIMIT',
    '1Gi',
    'Ephemeral-storage limit of the sandbox container (logs and writable layers).',
  ),
  workspaceSizeLimit: quantityField(
    'CODEMODE_WORKSPACE_SIZE_LIMIT',
    '512Mi',
    'Size limit of the /workspace emptyDir. On disk: checked from inside the sandbox five times a second during a run (which is stopped past it) and all through a session (which is ended), each file or directory counting at least 4 KiB (512Mi holds at most 131072), files deleted while still open included, and the kubelet evicts past it (bytes it sees); in memory (CODEMODE_WORKSPACE_MEDIUM=Memory): the size of the tmpfs, a hard limit.',
  ),
  workspaceMedium: field(
    {
      env: 'CODEMODE_WORKSPACE_MEDIUM',
      default: 'Disk',
      description:
        "Where /workspace lives. Disk: an emptyDir on the node's disk, which may hold more than the memory limit; its files count at least 4 KiB each against CODEMODE_WORKSPACE_SIZE_LIMIT (a run past it is stopped, a session ended), measured from inside the sandbox, and nothing bounds its disk bandwidth, which etcd and every pod on that disk share. Memory: a tmpfs with a hard size (a write past it fails at once, DiskFull), its files and their inodes counted against the sandbox's memory limit, and no disk writes at all: for nodes whose disk is shared with etcd or latency-bound work. A SandboxProfile may set its own (spec.workspace.medium).",
      allowed: 'Disk or Memory',
    },
    WorkspaceMediumSchema,
  ),
  tmpSizeLimit: quantityField(
    'CODEMODE_TMP_SIZE_LIMIT',
    '128Mi',
    'Size of /tmp, a memory-backed emptyDir (tmpfs): a hard limit, and it counts against the memory limit.',
  ),
  ttlSecondsAfterFinished: field(
    {
      env: 'CODEMODE_TTL_SECONDS_AFTER_FINISHED',
      default: '3600',
      description: 'Seconds a finished SandboxRun is kept when it does not set spec.ttlSecondsAfterFinished.',
      allowed: `an integer from 0 to ${MAX_TTL_SECONDS_AFTER_FINISHED} (one week), not above CODEMODE_MAX_TTL_SECONDS_AFTER_FINISHED`,
    },
    int(0, MAX_TTL_SECONDS_AFTER_FINISHED),
  ),
  podStartupTimeoutSeconds: field(
    {
      env: 'CODEMODE_POD_STARTUP_TIMEOUT_SECONDS',
      default: '120',
      description:
        'How long a sandbox pod may take to become ready before the run fails; also how long a call in a session waits while another call runs there or the session starts.',
      allowed: 'an integer from 1 to 3600',
    },
    int(1, 3600),
  ),
  resyncSeconds: field(
    {
      env: 'CODEMODE_RESYNC_SECONDS',
      default: '300',
      description: "Period of the controller's full resync of every SandboxRun.",
      allowed: 'an integer from 1 to 86400',
    },
    int(1, 86400),
  ),
  runtimeClassName: optionalField(
    {
      env: 'CODEMODE_RUNTIME_CLASS',
      default: '',
      description: 'RuntimeClass of sandbox pods (e.g. gvisor); the cluster default when empty.',
      allowed: 'a RuntimeClass name (DNS-1123 subdomain)',
    },
    z
      .string()
      .max(253)
      .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/, {
        error: 'must be a DNS-1123 subdomain: lowercase letters, digits, - and .',
      }),
  ),
  bindAddress: field(
    {
      env: 'CODEMODE_BIND_ADDRESS',
      default: '127.0.0.1',
      description: 'Address the MCP gateway listens on.',
      allowed: 'an IP address or host name, e.g. 127.0.0.1, 0.0.0.0 or ::',
    },
    z.string().regex(/^[A-Za-z0-9.:%-]+$/, { error: 'must be an IP address or host name' }),
  ),
  port: field(
    {
      env: 'CODEMODE_PORT',
      default: '8080',
      description: 'Port the MCP gateway listens on (0 picks a free port).',
      allowed: 'an integer from 0 to 65535',
    },
    int(0, 65535),
  ),
  allowedHosts: optionalField(
    {
      env: 'CODEMODE_ALLOWED_HOSTS',
      default: '',
      description: 'Comma-separated Host header names the gateway accepts (DNS-rebinding protection). Empty: localhost, 127.0.0.1 and [::1] only.',
      allowed: 'a comma-separated list of host names or IP addresses, without scheme or port',
    },
    commaList(host),
  ),
  allowedOrigins: optionalField(
    {
      env: 'CODEMODE_ALLOWED_ORIGINS',
      default: '',
      description:
        'Comma-separated browser Origins allowed to call the gateway; a request whose Origin header is not listed is refused (requests without Origin are unaffected).',
      allowed: 'a comma-separated list of origins such as https://app.example.com',
    },
    commaList(origin),
  ),
  sessionMaxIdleTimeoutSeconds: field(
    {
      env: 'CODEMODE_SESSION_MAX_IDLE_TIMEOUT_SECONDS',
      default: '3600',
      description: 'Largest idleTimeoutSeconds a session may ask for (sessions default to 600, or to this maximum when it is lower).',
      allowed: 'an integer from 10 to 86400',
    },
    int(10, 86400),
  ),
  sessionMaxLifetimeSeconds: field(
    {
      env: 'CODEMODE_SESSION_MAX_LIFETIME_SECONDS',
      default: '86400',
      description: 'A session is deleted this long after its creation, busy or not (and no session may ask for more).',
      allowed: 'an integer from 60 to 604800 (one week)',
    },
    int(60, 604800),
  ),
  warmPoolSize: optionalField(
    {
      env: 'CODEMODE_WARM_POOL_SIZE',
      default: '',
      description: "Former name of CODEMODE_WARM_POOL_MIN, still read as the pool's minimum; 0 (without CODEMODE_WARM_POOL_MAX) disables and drains the pool.",
      allowed: 'an integer from 0 to 100, equal to CODEMODE_WARM_POOL_MIN if both are set',
    },
    int(0, 100),
  ),
  warmPoolRefillDeferMs: field(
    {
      env: 'CODEMODE_WARM_POOL_REFILL_DEFER_MS',
      default: '1000',
      description:
        'While the pool still has a ready pod, the replacement for a claimed pod is started when the transient runs executing in pool pods have ended, but at most this long after the claim, so that starting it does not take CPU from those runs on a small node; 0 starts it at once.',
      allowed: 'an integer from 0 to 10000',
    },
    int(0, 10000),
  ),
  warmPoolReserve: field(
    {
      env: 'CODEMODE_WARM_POOL_RESERVE',
      default: '1',
      description:
        "Ready pool pods each gateway replica keeps reserved for its own next warm run, per profile (0 or 1): the reservation is the claim made ahead of time, so a warm run's code starts right after its SandboxRun is created, without waiting for a claim's API write. Reserved after each warm run of the replica (so its first warm run takes two pool pods); the pool refills behind it. 0: every warm run claims its pod on its path (one API write more).",
      allowed: '0 or 1',
    },
    int(0, 1),
  ),
  maxFileBytes: field(
    {
      env: 'CODEMODE_MAX_FILE_BYTES',
      default: '1048576',
      description: 'Largest file read_file returns and write_file accepts, in bytes.',
      allowed: 'an integer from 1 to 8388608',
    },
    int(1, 8388608),
  ),
  logLevel: field(
    {
      env: 'CODEMODE_LOG_LEVEL',
      default: 'info',
      description: 'Minimum level of the JSON logs.',
      allowed: 'trace, debug, info, warn or error',
    },
    z.enum(['trace', 'debug', 'info', 'warn', 'error']),
  ),
  // Authentication (issue 9): who is calling /mcp.
  authMode: field(
    {
      env: 'CODEMODE_AUTH_MODE',
      default: 'none',
      description:
        'How callers of /mcp are authenticated: none (loopback development only), tokens (static bearer tokens from a Secret), kubernetes (TokenReview) or oidc (JWTs from an OAuth 2.1 / OIDC issuer).',
      allowed: 'none, tokens, kubernetes or oidc',
    },
    z.enum(['none', 'tokens', 'kubernetes', 'oidc']),
  ),
  authNoneBeyondLoopback: field(
    {
      env: 'CODEMODE_AUTH_NONE_BEYOND_LOOPBACK',
      default: 'false',
      description:
        'Lets a gateway with CODEMODE_AUTH_MODE=none listen beyond loopback, where anyone who reaches it can run code; it then warns on every start. Off: such a gateway refuses to start.',
      allowed: 'true or false',
    },
    z.enum(['true', 'false']).transform((v) => v === 'true'),
  ),
  authTokensSecret: field(
    {
      env: 'CODEMODE_AUTH_TOKENS_SECRET',
      default: 'codemode-tokens',
      description:
        'Secret (in CODEMODE_NAMESPACE) whose key tokens.csv lists the bearer tokens of mode tokens, one `token,user,uid,"group1,group2"` line each (the kube-apiserver static token format); watched, so edits apply without a restart.',
      allowed: 'a Secret name (DNS-1123 subdomain)',
    },
    z
      .string()
      .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/, { error: 'must be a DNS-1123 subdomain' })
      .max(253),
  ),
  authAudience: optionalField(
    {
      env: 'CODEMODE_AUTH_AUDIENCE',
      default: '',
      description: "Audience a token must be issued for in mode kubernetes (TokenReview audiences); empty accepts the API server's own audience.",
      allowed: 'a non-empty string without spaces',
    },
    z.string().regex(/^\S+$/, { error: 'must not contain spaces' }),
  ),
  oidcIssuer: optionalField(
    {
      env: 'CODEMODE_OIDC_ISSUER',
      default: '',
      description: 'Issuer URL of mode oidc: JWTs must carry it as iss; its discovery document gives the JWKS unless CODEMODE_OIDC_JWKS_URL is set.',
      allowed: 'an http(s) URL',
    },
    z.url({ protocol: /^https?$/, error: 'must be an http or https URL' }),
  ),
  oidcAudience: optionalField(
    {
      env: 'CODEMODE_OIDC_AUDIENCE',
      default: '',
      description: "Audience (aud) JWTs must be issued for in mode oidc, usually the gateway's public /mcp URL.",
      allowed: 'a non-empty string without spaces',
    },
    z.string().regex(/^\S+$/, { error: 'must not contain spaces' }),
  ),
  oidcJwksUrl: optionalField(
    {
      env: 'CODEMODE_OIDC_JWKS_URL',
      default: '',
      description: "Where the issuer's signing keys (JWKS) are; by default from the issuer's discovery document.",
      allowed: 'an http(s) URL',
    },
    z.url({ protocol: /^https?$/, error: 'must be an http or https URL' }),
  ),
  oidcUsernameClaim: field(
    { env: 'CODEMODE_OIDC_USERNAME_CLAIM', default: 'sub', description: 'JWT claim that names the user in mode oidc.', allowed: 'a claim name' },
    z.string().regex(/^[A-Za-z0-9_.:-]+$/, { error: 'must be a claim name' }),
  ),
  oidcGroupsClaim: field(
    { env: 'CODEMODE_OIDC_GROUPS_CLAIM', default: 'groups', description: "JWT claim with the user's groups in mode oidc.", allowed: 'a claim name' },
    z.string().regex(/^[A-Za-z0-9_.:-]+$/, { error: 'must be a claim name' }),
  ),
  // Owners are compared as stored, so gateway and cluster user names would otherwise share one
  // space: a cluster user `bob` owns gateway user `bob`'s sessions (README, ownership).
  usernamePrefix: optionalField(
    {
      env: 'CODEMODE_USERNAME_PREFIX',
      default: '',
      docDefault: 'none',
      description:
        "Prepended to every user name the gateway authenticates itself (modes tokens and oidc), as the API server's --oidc-username-prefix: gateway user bob becomes e.g. gw:bob in owners, limits and upstream access rules, a name no cluster user bob can claim with kubectl. Changing it leaves existing sessions to their old owner names.",
      allowed: 'up to 64 characters without spaces, commas or control characters, not starting with system:',
    },
    identityPrefix,
  ),
  groupsPrefix: optionalField(
    {
      env: 'CODEMODE_GROUPS_PREFIX',
      default: '',
      docDefault: 'none',
      description:
        "Prepended to every group name the gateway authenticates itself (modes tokens and oidc), as the API server's --oidc-groups-prefix; CODEMODE_ADMIN_GROUPS and UpstreamServer access rules then name groups with it.",
      allowed: 'up to 64 characters without spaces, commas or control characters, not starting with system:',
    },
    identityPrefix,
  ),
  publicUrl: optionalField(
    {
      env: 'CODEMODE_PUBLIC_URL',
      default: '',
      docDefault: 'the URL of each request',
      description: 'Public base URL of the gateway (e.g. https://mcp.example.com), used in the OAuth protected-resource metadata and WWW-Authenticate headers.',
      allowed: 'an http(s) URL of scheme, host and optional port only (no path, query or fragment)',
    },
    baseUrl,
  ),
  adminGroups: optionalField(
    {
      env: 'CODEMODE_ADMIN_GROUPS',
      default: '',
      description:
        "Comma-separated groups whose members see and use every user's sessions (others see only their own); named with CODEMODE_GROUPS_PREFIX when it is set.",
      allowed: 'a comma-separated list of group names',
    },
    commaList(z.string().regex(/^[^,\s]+$/, { error: 'must be a group name without spaces' })),
  ),
  // Sandbox self-check (issue 14, point 3): a canary sandbox reports what the cluster enforces.
  sandboxCheckIntervalSeconds: field(
    {
      env: 'CODEMODE_SANDBOX_CHECK_INTERVAL_SECONDS',
      default: '600',
      description:
        'Period of the sandbox self-check: a canary sandbox pod reports from the inside whether the process cap, memory limit, read-only root, absence of a service-account token and network isolation are enforced (it also runs at start, and when another NetworkPolicy in the namespace changes).',
      allowed: 'an integer from 10 to 86400',
    },
    int(10, 86400),
  ),
  maxProcesses: field(
    {
      env: 'CODEMODE_MAX_PROCESSES',
      default: '128',
      description:
        "Process cap every sandbox must have: the canary must observe pids.max (set by the kubelet's podPidsLimit) at most this, or meet the limit before this many processes.",
      allowed: 'an integer from 8 to 4096',
    },
    int(8, 4096),
  ),
  acceptUnenforced: optionalField(
    {
      env: 'CODEMODE_ACCEPT_UNENFORCED',
      default: '',
      description:
        'Comma-separated sandbox checks the administrator accepts as not enforced by this cluster: code then runs anyway (with a warning on every start) instead of being refused.',
      allowed: `a comma-separated subset of ${SANDBOX_CHECKS.join(', ')}`,
    },
    commaList(z.enum(SANDBOX_CHECKS)),
  ),
  // Issue 14, bounded storage: what one SandboxRun may hold and how long it is kept.
  outputCapBytes: field(
    {
      env: 'CODEMODE_OUTPUT_CAP_BYTES',
      default: '65536',
      description:
        'UTF-8 bytes of stdout and of stderr (each) kept in the result and in SandboxRun status, cut at a character boundary; the smaller of this and CODEMODE_OUTPUT_CAP_CHARS applies.',
      // Code, stdin and both outputs at their API bounds still fit etcd's 1.5 MiB request limit.
      allowed: `an integer from 1 to ${MAX_OUTPUT_BYTES_HARD}`,
    },
    int(1, MAX_OUTPUT_BYTES_HARD),
  ),
  maxTtlSecondsAfterFinished: field(
    {
      env: 'CODEMODE_MAX_TTL_SECONDS_AFTER_FINISHED',
      default: '86400',
      description: 'Longest a finished SandboxRun is kept, whatever its spec.ttlSecondsAfterFinished asks (a larger value is shortened to this).',
      allowed: `an integer from 0 to ${MAX_TTL_SECONDS_AFTER_FINISHED} (one week), not below CODEMODE_TTL_SECONDS_AFTER_FINISHED`,
    },
    int(0, MAX_TTL_SECONDS_AFTER_FINISHED),
  ),

  // --- Back-pressure (issue 14, point 5): caps with clear errors instead of unbounded pods. ---
  maxConcurrentRuns: field(
    {
      env: 'CODEMODE_MAX_CONCURRENT_RUNS',
      default: '16',
      description:
        "Transient runs (each in its own sandbox pod) one gateway replica executes at once, execute_code calls and kubectl-created SandboxRuns together; further calls wait in the queue. Calls in a session are not counted (they use the session's pod, one call at a time).",
      allowed: 'an integer from 1 to 1000, not above CODEMODE_MAX_NAMESPACE_RUNS',
    },
    int(1, 1000),
  ),
  maxNamespaceRuns: field(
    {
      env: 'CODEMODE_MAX_NAMESPACE_RUNS',
      default: '64',
      description:
        'Transient runs executing at once in the namespace across all gateway replicas, counted from the SandboxRuns every replica watches (a soft cap: replicas admitting in the same instant may pass it briefly; the ResourceQuota in deploy/ is the hard one).',
      allowed: 'an integer from 1 to 10000',
    },
    int(1, 10000),
  ),
  maxSessions: field(
    {
      env: 'CODEMODE_MAX_SESSIONS',
      default: '32',
      description: 'Live SandboxSessions in the namespace; create_session beyond it is refused with the count and when the next idle session expires.',
      allowed: 'an integer from 1 to 10000',
    },
    int(1, 10000),
  ),
  runQueueLength: field(
    {
      env: 'CODEMODE_RUN_QUEUE_LENGTH',
      default: '32',
      description:
        'execute_code calls one replica holds waiting for a free run slot; a call beyond it is refused at once. 0: refuse whenever the runs are at their cap.',
      allowed: 'an integer from 0 to 10000',
    },
    int(0, 10000),
  ),
  runQueueTimeoutSeconds: field(
    {
      env: 'CODEMODE_RUN_QUEUE_TIMEOUT_SECONDS',
      default: '30',
      description: 'Longest an execute_code call waits in the queue for a run slot before it is refused with a capacity error.',
      allowed: 'an integer from 1 to 600',
    },
    int(1, 600),
  ),
  userRequestsPerSecond: optionalField(
    {
      env: 'CODEMODE_USER_REQUESTS_PER_SECOND',
      default: '',
      docDefault: '200; 0 with CODEMODE_AUTH_MODE=none',
      description:
        'Requests to /mcp one user may send to one gateway replica a second in the long run, after a burst of twice as many (at least 10); a request beyond it is answered HTTP 429 with Retry-After before anything in it runs, and other users are served. Per replica: behind N replicas a user may send up to N times as many. Each request costs the replica about a millisecond of its one event loop, refused or not: unset, 200 (an agent sends a few a second, a script calling a session back to back up to ~100; a user flooding the replica takes at most about a fifth of it); without authentication (CODEMODE_AUTH_MODE=none) every caller is the one anonymous user, and there is no limit unless set. 0: no limit.',
      allowed: 'an integer from 0 to 100000',
    },
    int(0, 100000),
  ),
  maxBatchSize: field(
    {
      env: 'CODEMODE_MAX_BATCH_SIZE',
      default: '10',
      description:
        'Messages in one JSON-RPC batch (2025-03-26 clients may send arrays); a longer batch is refused with HTTP 400 and a JSON-RPC error before any of it runs.',
      allowed: 'an integer from 1 to 100 (the MCP SDK refuses more than 100 anyway)',
    },
    int(1, 100),
  ),
  progressHeartbeatSeconds: field(
    {
      env: 'CODEMODE_PROGRESS_HEARTBEAT_SECONDS',
      default: '15',
      description:
        'A call that may take long (execute_code, create_session, install_packages) and whose client sent a progress token gets a progress notification without a message after this many seconds without one: while a run prints nothing, a call waits for its busy session or a pod starts. Clients that reset their request timeout on progress, and proxies that close a silent response stream (often after 60 s), then keep the call. 0 sends none.',
      allowed: 'an integer from 0 to 300',
    },
    int(0, 300),
  ),
  maxConnections: field(
    {
      env: 'CODEMODE_MAX_CONNECTIONS',
      default: '4096',
      description:
        "Open client connections this replica's HTTP server accepts at once (idle kept-alive ones count: they stay open 65 s); a connection over the limit is closed as soon as it is accepted, unanswered, while the open ones are served. Bounds the descriptors and memory one client holding many sockets can take of the gateway. Before anyone is authenticated a connection counts too: one whose first request has not arrived within 10 s is closed, at most 256 from one address wait for their first request at once (past that a new one from there is closed at once; a proxy in front sends its request as it connects), and a connection whose request named no user (authentication refused, a wrong Host, the probes and /metrics) is closed after its response, so a client that never authenticates holds connections for seconds, not for the keep-alive timeout. With authentication, a user keeps at most a sixteenth of it (256 by default) open between requests: past that a response closes its connection (the request is served).",
      allowed: 'an integer from 16 to 1000000',
    },
    int(16, 1_000_000),
  ),
  // Warm pool sized by demand (issue 13, part 4).
  warmPoolMin: optionalField(
    {
      env: 'CODEMODE_WARM_POOL_MIN',
      default: '',
      docDefault: '2 (or CODEMODE_WARM_POOL_SIZE)',
      description:
        'Fewest ready pre-started sandbox pods (python kernel) kept for runs and sessions; the pool grows above it with demand (claims per second × time to ready, plus half again) up to CODEMODE_WARM_POOL_MAX. 0 with CODEMODE_WARM_POOL_MAX=0 disables the pool and deletes its pods.',
      allowed: 'an integer from 0 to 100, at most CODEMODE_WARM_POOL_MAX, and at least 1 unless the maximum is 0',
    },
    int(0, 100),
  ),
  warmPoolMax: optionalField(
    {
      env: 'CODEMODE_WARM_POOL_MAX',
      default: '',
      docDefault: '8 (at least the minimum; 0 when the minimum is 0)',
      description: 'Most pre-started sandbox pods the pool grows to under demand; 0 disables the pool and deletes its pods.',
      allowed: 'an integer from 0 to 100, at least CODEMODE_WARM_POOL_MIN',
    },
    int(0, 100),
  ),
  // --- Per-user limits and audit records (issue 9, audit part). 0 = unlimited. ---
  // Unset, the runs and sessions limits are a quarter of the namespace's (config/index.ts): on an
  // endpoint a team shares, one user (or one prompt-injected agent) could otherwise take every
  // session and run slot, and every other user was refused.
  userMaxRuns: optionalField(
    {
      env: 'CODEMODE_USER_MAX_RUNS',
      default: '',
      docDefault: 'a quarter of CODEMODE_MAX_CONCURRENT_RUNS or CODEMODE_MAX_NAMESPACE_RUNS, the smaller (4); 0 with CODEMODE_AUTH_MODE=none',
      description:
        'Transient runs one user (the authenticated owner) may have executing at once across all gateway replicas, counted from the SandboxRuns every replica watches; a call beyond it is refused with the count and when to retry. Applies to the admin groups too. Unset: a quarter of CODEMODE_MAX_CONCURRENT_RUNS or CODEMODE_MAX_NAMESPACE_RUNS, whichever is smaller (at least 1), so that one user cannot take every run slot of a replica (the calls of other users would wait in its queue, then be refused); without authentication (CODEMODE_AUTH_MODE=none) every caller is one user, and there is no per-user limit unless set. 0: no per-user limit.',
      allowed: 'an integer from 0 to 10000',
    },
    int(0, 10000),
  ),
  userMaxSessions: optionalField(
    {
      env: 'CODEMODE_USER_MAX_SESSIONS',
      default: '',
      docDefault: 'a quarter of CODEMODE_MAX_SESSIONS (8); 0 with CODEMODE_AUTH_MODE=none',
      description:
        'Live SandboxSessions one user may own across all gateway replicas; create_session beyond it is refused, and a SandboxSession applied with kubectl beyond it fails (reason UserSessionLimit) without a pod. Applies to the admin groups too. Unset: a quarter of CODEMODE_MAX_SESSIONS (at least 1), so that one user cannot take every session of a shared endpoint; without authentication (CODEMODE_AUTH_MODE=none) every caller is one user, and there is no per-user limit unless set. 0: no per-user limit.',
      allowed: 'an integer from 0 to 10000',
    },
    int(0, 10000),
  ),
  userMaxExecutionsPerMinute: field(
    {
      env: 'CODEMODE_USER_MAX_EXECUTIONS_PER_MINUTE',
      default: '0',
      description:
        'Executions (execute_code calls, in sessions or not) one user may start in any 60 s across all gateway replicas, counted from the SandboxRuns and audit records created in the last minute (audit records show on other replicas after they are written, usually within one to two seconds). Applies to the admin groups too. 0: no per-user limit.',
      allowed: 'an integer from 0 to 100000',
    },
    int(0, 100000),
  ),
  auditQueueLength: field(
    {
      env: 'CODEMODE_AUDIT_QUEUE_LENGTH',
      default: '1000',
      description:
        'Session calls one replica holds waiting for their audit record (each call in a session is recorded in a finished SandboxRun after its reply, together with the calls of its session that follow within a second); while the API server is unreachable the queue fills; once it is full, the newest calls of the user holding the most of it are dropped, counted in codemode_audit_records_total{result="dropped"} and logged.',
      allowed: 'an integer from 1 to 100000',
    },
    int(1, 100000),
  ),
  auditTtlSeconds: field(
    {
      env: 'CODEMODE_AUDIT_TTL_SECONDS',
      default: '600',
      description:
        "Seconds an audit record of session calls is kept in the API (its spec.ttlSecondsAfterFinished). Records count against the namespace's SandboxRun quota like runs do: a session making calls writes at most about one record a second (up to 100 calls each), a session calling now and then one per call; CODEMODE_AUDIT_MAX_RECORDS and CODEMODE_AUDIT_MAX_RECORDS_PER_USER bound how many live at once. Ship the operator's logs for a longer history.",
      allowed: `an integer from 60 to ${MAX_TTL_SECONDS_AFTER_FINISHED} (CODEMODE_MAX_TTL_SECONDS_AFTER_FINISHED shortens it, as for every run)`,
    },
    int(60, MAX_TTL_SECONDS_AFTER_FINISHED),
  ),
  auditMaxRecords: field(
    {
      env: 'CODEMODE_AUDIT_MAX_RECORDS',
      default: '1000',
      description:
        "Audit records of session calls live in the namespace at once, all users together, counted from the SandboxRuns every replica watches. Records count against the namespace's SandboxRun quota (count/sandboxruns; the chart's default is 2000) with every run: keep this well below it, so that records never leave runs without room. At the cap, calls wait in the replica's audit queue (CODEMODE_AUDIT_QUEUE_LENGTH), gathering into one record of up to 100 calls, until a record reaches its TTL (CODEMODE_AUDIT_TTL_SECONDS); the session calls themselves are not held up. Soft across replicas by the records they write in the same second.",
      allowed: 'an integer from 1 to 1000000',
    },
    int(1, 1_000_000),
  ),
  auditMaxRecordsPerUser: field(
    {
      env: 'CODEMODE_AUDIT_MAX_RECORDS_PER_USER',
      default: '250',
      description:
        "Audit records of one user's session calls live at once (the authenticated owner; without authentication every caller is one user), so that one user's busy sessions cannot take all of CODEMODE_AUDIT_MAX_RECORDS: that user's calls wait, gathering into fewer records, while other users' are written.",
      allowed: 'an integer from 1 to 1000000',
    },
    int(1, 1_000_000),
  ),
  // --- Code mode: nested tool calls from sandbox code, per run (issue 11; src/codemode) ---
  toolCallsPerRun: field(
    {
      env: 'CODEMODE_TOOL_CALLS_PER_RUN',
      default: '100',
      description:
        'Upstream tool calls one execution (a session call or a run) may make from its code; the call after the last raises a ToolError (kind "limit") in the program. Discovery (servers, search, describe) is not counted.',
      allowed: 'an integer from 1 to 100000',
    },
    int(1, 100000),
  ),
  toolCallTimeoutSeconds: field(
    {
      env: 'CODEMODE_TOOL_CALL_TIMEOUT_SECONDS',
      default: '30',
      description:
        'Seconds one nested tool call may wait for its upstream; the execution\'s own remaining time shortens it (time waiting on upstreams counts against the execution\'s timeout). A call past it raises a ToolError (kind "timeout").',
      allowed: 'an integer from 1 to 3600',
    },
    int(1, 3600),
  ),
  toolResultMaxBytes: field(
    {
      env: 'CODEMODE_TOOL_RESULT_MAX_BYTES',
      default: '65536',
      description:
        'A tool result whose JSON is larger is cut structurally before it enters the sandbox (same shape: arrays shortened, strings ending in "…", every object key kept while it fits), with a sentence saying what was cut. Values nested deeper than 64 levels are emptied in any result.',
      allowed: 'an integer from 1024 to 2097152 (the kernel accepts requests up to 4 MiB)',
    },
    int(1024, 2 * 1024 * 1024),
  ),
  toolBytesPerRun: field(
    {
      env: 'CODEMODE_TOOL_BYTES_PER_RUN',
      default: '8388608',
      description: 'Bytes of tool results (after cutting) and discovery answers one execution may receive; a result past it raises a ToolError (kind "limit").',
      allowed: 'an integer from 1024 to 1073741824',
    },
    int(1024, 1024 * 1024 * 1024),
  ),
  // --- Upstream MCP servers (issue 11, upstreams part). ---
  upstreamHealthIntervalSeconds: field(
    {
      env: 'CODEMODE_UPSTREAM_HEALTH_INTERVAL_SECONDS',
      default: '15',
      description:
        'Seconds between pings of each connected UpstreamServer (a vanished upstream turns Ready False within about this long), and the longest wait between reconnect attempts (backoff from 1 s).',
      allowed: 'an integer from 1 to 600',
    },
    int(1, 600),
  ),
  upstreamRequestTimeoutSeconds: field(
    {
      env: 'CODEMODE_UPSTREAM_REQUEST_TIMEOUT_SECONDS',
      default: '10',
      description:
        "Longest the gateway waits for an UpstreamServer to answer a connect, tools/list or ping (tool calls have the UpstreamServer's own spec.callTimeoutSeconds).",
      allowed: 'an integer from 1 to 300',
    },
    int(1, 300),
  ),
  upstreamMessageMaxBytes: field(
    {
      env: 'CODEMODE_UPSTREAM_MESSAGE_MAX_BYTES',
      default: '16777216',
      description:
        'Largest single message (a JSON answer or one SSE event) the gateway reads from an UpstreamServer; a larger answer fails that call (or that tools/list) with a message saying so, and the gateway never holds more of it. Tool results are then cut further to CODEMODE_TOOL_RESULT_MAX_BYTES before they enter a sandbox.',
      allowed: 'an integer from 65536 to 268435456',
    },
    int(64 * 1024, 256 * 1024 * 1024),
  ),
  upstreamCallsPerServer: field(
    {
      env: 'CODEMODE_UPSTREAM_CALLS_PER_SERVER',
      default: '64',
      description:
        "Tool calls one gateway replica has in flight at once to one UpstreamServer, all users together; calls past it wait in line (the wait counts against the call's timeout), and a freed place goes to the waiting users in turn.",
      allowed: 'an integer from 1 to 10000',
    },
    int(1, 10000),
  ),
  upstreamCallsPerUser: field(
    {
      env: 'CODEMODE_UPSTREAM_CALLS_PER_USER',
      default: '16',
      description:
        "Of those, the calls one user's programs have in flight at once to one UpstreamServer (per replica), so one user's code cannot take an upstream's every place; their further calls wait behind their own.",
      allowed: 'an integer from 1 to 10000',
    },
    int(1, 10000),
  ),
  // --- Profiles (issue 12) ---
  defaultProfile: field(
    {
      env: 'CODEMODE_DEFAULT_PROFILE',
      default: 'default',
      description:
        "The SandboxProfile of runs and sessions that name none. `default` is built from this gateway's own settings (CODEMODE_IMAGE_*, CODEMODE_DEFAULT_CPU, CODEMODE_WARM_POOL_*, ...) unless a SandboxProfile named default exists; any other name must exist as a SandboxProfile.",
      allowed: 'a SandboxProfile name: lowercase letters, digits and -, at most 40 characters',
    },
    z
      .string()
      .regex(/^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$/, { error: 'must be a SandboxProfile name (lowercase letters, digits and -, at most 40 characters)' }),
  ),
  // --- What search_tools writes into its reply's text (issue 11: compact text, TOON where it pays) ---
  resultFormat: field(
    {
      env: 'CODEMODE_RESULT_FORMAT',
      default: 'text',
      description:
        "How search_tools writes its results into the reply's text (structuredContent is JSON either way): text, one signature per line; json, compact JSON; toon, TOON where the results form a uniform table and compact JSON otherwise. A call may ask for another with its format argument.",
      allowed: 'text, json or toon',
    },
    z.enum(RESULT_FORMATS),
  ),
  // --- Rich outputs (issue 12: plots as images; src/exec/display.ts) ---
  displayMaxImageBytes: field(
    {
      env: 'CODEMODE_DISPLAY_MAX_IMAGE_BYTES',
      default: '2097152',
      description:
        "Largest image (decoded bytes) a call's code may return through display() or an open Matplotlib figure; a larger one is replaced by a note saying so.",
      allowed: 'an integer from 1024 to 8388608',
    },
    int(1024, 8 * 1024 * 1024),
  ),
  displayMaxBytes: field(
    {
      env: 'CODEMODE_DISPLAY_MAX_BYTES',
      default: '5242880',
      description: 'Bytes of images one call may return in all; images past it are replaced by notes.',
      allowed: 'an integer from 1024 to 33554432',
    },
    int(1024, 32 * 1024 * 1024),
  ),
  displayMaxItems: field(
    {
      env: 'CODEMODE_DISPLAY_MAX_ITEMS',
      default: '10',
      description: 'Display items (images, HTML, tables) one call may return; one note says how many more were left out.',
      allowed: 'an integer from 0 to 100',
    },
    int(0, 100),
  ),
  // --- stdio UpstreamServers: the operator runs them behind our bridge (issue 11, stdio part) ---
  stdioBridgeImage: field(
    {
      env: 'CODEMODE_STDIO_BRIDGE_IMAGE',
      default: 'codemode.local/stdio-bridge:v1',
      description:
        "Image holding the stdio bridge binary (images/stdio-bridge): the init container of every stdio UpstreamServer's pod copies it into the server's own image.",
      allowed: 'an image reference',
    },
    z
      .string()
      .min(1)
      .max(512)
      .regex(/^[^\s]+$/, { error: 'must be an image reference without spaces' }),
  ),
  stdioGatewayPodLabels: field(
    {
      env: 'CODEMODE_STDIO_GATEWAY_POD_LABELS',
      default: 'app.kubernetes.io/name=codemode-operator',
      description:
        "Labels of the gateway's pods (key=value,key=value): the NetworkPolicy of a stdio UpstreamServer admits only pods with these labels to its bridge. The chart sets its own selector labels.",
      allowed: 'comma-separated key=value label pairs',
    },
    z.string().regex(/^[A-Za-z0-9./_-]+=[A-Za-z0-9._-]*(,[A-Za-z0-9./_-]+=[A-Za-z0-9._-]*)*$/, { error: 'must be key=value pairs separated by commas' }),
  ),
  stdioGatewayNamespace: optionalField(
    {
      env: 'CODEMODE_STDIO_GATEWAY_NAMESPACE',
      default: '',
      docDefault: 'CODEMODE_NAMESPACE',
      description:
        "Namespace of the gateway's pods, for the same NetworkPolicy (unset: the UpstreamServer's own namespace). The chart sets the release namespace.",
      allowed: 'a DNS-1123 label (at most 63 characters)',
    },
    dnsLabel,
  ),
  // --- Packages in sessions (issue 12): fetched outside the sandbox, delivered over exec ---
  packagesEcosystems: field(
    {
      env: 'CODEMODE_PACKAGES_ECOSYSTEMS',
      default: 'pypi,npm',
      description:
        'Registries sessions may install packages from (create_session packages, install_packages) unless their SandboxProfile says otherwise; none refuses every install.',
      allowed: 'a comma-separated subset of pypi, npm, or none',
    },
    commaList(z.enum([...ECOSYSTEMS, 'none'])).transform((l) => l.filter((e) => e !== 'none') as Ecosystem[]),
  ),
  packagesAllow: field(
    {
      env: 'CODEMODE_PACKAGES_ALLOW',
      default: '',
      description:
        'When not empty, the only packages sessions may install, dependencies included (pypi:<name>[==<version>], npm:<name>[@<version>], comma-separated); a SandboxProfile may set its own.',
      allowed: 'comma-separated pypi:<name>[==<version>] or npm:<name>[@<version>] entries',
    },
    commaList(z.string().regex(POLICY_ENTRY, { error: 'must be pypi:<name>[==<version>] or npm:<name>[@<version>]' })),
  ),
  packagesDeny: field(
    {
      env: 'CODEMODE_PACKAGES_DENY',
      default: '',
      description: 'Packages (or single versions) sessions may never install, dependencies included; same syntax as CODEMODE_PACKAGES_ALLOW.',
      allowed: 'comma-separated pypi:<name>[==<version>] or npm:<name>[@<version>] entries',
    },
    commaList(z.string().regex(POLICY_ENTRY, { error: 'must be pypi:<name>[==<version>] or npm:<name>[@<version>]' })),
  ),
  packagesMaxPackageBytes: field(
    {
      env: 'CODEMODE_PACKAGES_MAX_PACKAGE_BYTES',
      default: '52428800',
      description: "Largest single package a session may install: a PyPI wheel's size, an npm package's unpacked size.",
      allowed: 'an integer from 1024 to 2147483648',
    },
    int(1024, 2 ** 31),
  ),
  packagesMaxTotalBytes: field(
    {
      env: 'CODEMODE_PACKAGES_MAX_TOTAL_BYTES',
      default: '209715200',
      description: "Most bytes one install delivers into a session's /workspace, dependencies included (the workspace's own size limit applies as well).",
      allowed: 'an integer from 1024 to 8589934592',
    },
    int(1024, 2 ** 33),
  ),
  packagesPypiIndexUrl: field(
    {
      env: 'CODEMODE_PACKAGES_PYPI_INDEX_URL',
      default: 'https://pypi.org/simple',
      description: 'Python package index (or mirror) the fetcher pod resolves and downloads from (PEP 503/691 simple API).',
      allowed: 'an http(s) URL',
    },
    httpUrl,
  ),
  packagesNpmRegistry: field(
    {
      env: 'CODEMODE_PACKAGES_NPM_REGISTRY',
      default: 'https://registry.npmjs.org/',
      description: 'npm registry (or mirror) the fetcher pod resolves and downloads from.',
      allowed: 'an http(s) URL',
    },
    httpUrl,
  ),
  packagesCaFile: field(
    {
      env: 'CODEMODE_PACKAGES_CA_FILE',
      default: '/etc/ssl/certs/ca-certificates.crt',
      description:
        "PEM bundle of the certificate authorities the fetcher pod trusts for the index and registry (read by the gateway, handed to the fetcher on its exec stream): mount your mirror's CA here.",
      allowed: 'an absolute file path',
    },
    z.string().regex(/^\/[^\0]*$/, { error: 'must be an absolute path' }),
  ),
  packagesEgressCidrs: field(
    {
      env: 'CODEMODE_PACKAGES_EGRESS_CIDRS',
      default: '0.0.0.0/0',
      description:
        "Where fetcher pods may connect (ports 80 and 443; DNS on 53 besides): the index's and registry's addresses, comma-separated CIDRs. NetworkPolicy cannot name hosts, so narrow this to your mirror's addresses where you can.",
      allowed: 'comma-separated IPv4 or IPv6 CIDRs',
    },
    commaList(cidr),
  ),
  packagesEgressExcept: field(
    {
      env: 'CODEMODE_PACKAGES_EGRESS_EXCEPT',
      default: '10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,169.254.0.0/16,100.64.0.0/10',
      description:
        'Ranges inside CODEMODE_PACKAGES_EGRESS_CIDRS fetcher pods may not reach (default: private, link-local and carrier ranges, so a fetcher cannot reach the cluster or a cloud metadata service). Only those inside an allowed range apply: for an in-cluster mirror, set CODEMODE_PACKAGES_EGRESS_CIDRS to its addresses (empty here means this default).',
      allowed: 'comma-separated CIDRs',
    },
    commaList(cidr),
  ),
  packagesTimeoutSeconds: field(
    {
      env: 'CODEMODE_PACKAGES_TIMEOUT_SECONDS',
      default: '300',
      description: 'Longest one install may take: fetcher pod start, resolution, download and delivery into the session.',
      allowed: 'an integer from 10 to 3600',
    },
    int(10, 3600),
  ),
};

export type FieldKey = keyof typeof FIELDS;
