// The only reader of process.env. Configuration is parsed once at startup into a deeply frozen
// object and passed down; nothing else looks at the environment, so tests pass a plain object.
import { z } from 'zod';
import { describeIssue } from '../api/v1alpha1/index.js';
import type { Runtime } from '../api/v1alpha1/index.js';
import { deepFreeze } from '../util/deep-freeze.js';
import { FIELDS } from './fields.js';
import type { FieldKey } from './fields.js';
import { parseQuantity } from './quantity.js';
import type { SandboxCheckName } from '../selfcheck/evaluate.js';

export { parseQuantity } from './quantity.js';

/** Host names the gateway accepts when CODEMODE_ALLOWED_HOSTS is empty. */
export const LOOPBACK_HOSTS: readonly string[] = Object.freeze(['localhost', '127.0.0.1', '[::1]']);

/** Addresses that only this machine can reach. */
export function isLoopbackBind(address: string): boolean {
  return address === 'localhost' || address === '::1' || address === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(address);
}

export type ImagePullPolicy = 'Always' | 'IfNotPresent' | 'Never';
export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error';

export interface Config {
  readonly namespace: string;
  readonly sandboxImage: string;
  /** Image per runtime, already resolved (falls back to sandboxImage). */
  readonly images: Readonly<Record<Runtime, string>>;
  readonly imagePullPolicy: ImagePullPolicy;
  readonly defaultTimeoutSeconds: number;
  readonly maxTimeoutSeconds: number;
  readonly maxCodeBytes: number;
  /** Per stream (stdout and stderr each). */
  readonly outputCapChars: number;
  readonly defaultCpu: string;
  readonly defaultMemory: string;
  readonly maxCpu: string;
  readonly maxMemory: string;
  readonly cpuRequest: string;
  readonly memoryRequest: string;
  readonly ephemeralStorageLimit: string;
  readonly workspaceSizeLimit: string;
  readonly tmpSizeLimit: string;
  readonly ttlSecondsAfterFinished: number;
  readonly podStartupTimeoutSeconds: number;
  readonly resyncSeconds: number;
  readonly runtimeClassName?: string;
  readonly bindAddress: string;
  readonly port: number;
  /** Lowercase host names without port; LOOPBACK_HOSTS when the variable is empty. */
  readonly allowedHosts: readonly string[];
  /** Normalized origins (`https://host[:port]`); empty means no browser origin is allowed. */
  readonly allowedOrigins: readonly string[];
  readonly sessionMaxIdleTimeoutSeconds: number;
  readonly sessionMaxLifetimeSeconds: number;
  readonly maxFileBytes: number;
  /** Fewest pool pods kept (CODEMODE_WARM_POOL_MIN, formerly CODEMODE_WARM_POOL_SIZE). */
  readonly warmPoolMin: number;
  /** Most pool pods under demand; 0 disables and drains the pool. */
  readonly warmPoolMax: number;
  readonly warmPoolRefillDeferMs: number;
  readonly logLevel: LogLevel;
  readonly authMode: 'none' | 'tokens' | 'kubernetes' | 'oidc';
  readonly authNoneBeyondLoopback: boolean;
  readonly authTokensSecret: string;
  readonly authAudience?: string;
  readonly oidcIssuer?: string;
  readonly oidcAudience?: string;
  readonly oidcJwksUrl?: string;
  readonly oidcUsernameClaim: string;
  readonly oidcGroupsClaim: string;
  readonly publicUrl?: string;
  readonly adminGroups: readonly string[];
  // Sandbox self-check (issue 14, point 3).
  readonly sandboxCheckIntervalSeconds: number;
  readonly maxProcesses: number;
  /** Checks whose absence the administrator accepted (code runs anyway, with a warning). */
  readonly acceptUnenforced: readonly SandboxCheckName[];
  /** Per stream, in UTF-8 bytes (applied with outputCapChars). */
  readonly outputCapBytes: number;
  readonly maxTtlSecondsAfterFinished: number;
  // Back-pressure (issue 14, point 5).
  readonly maxConcurrentRuns: number;
  readonly maxNamespaceRuns: number;
  readonly maxSessions: number;
  readonly runQueueLength: number;
  readonly runQueueTimeoutSeconds: number;
  readonly maxBatchSize: number;
}

export interface ConfigProblem {
  env: string;
  /** The raw value, undefined when unset. */
  value: string | undefined;
  problem: string;
  allowed: string;
}

export class ConfigError extends Error {
  constructor(readonly problems: readonly ConfigProblem[]) {
    super(formatProblems(problems));
    this.name = 'ConfigError';
  }
}

function formatProblems(problems: readonly ConfigProblem[]): string {
  const lines = problems.map((p) => {
    const shown = p.value === undefined || p.value.trim() === '' ? '(default)' : JSON.stringify(p.value.length > 100 ? `${p.value.slice(0, 100)}…` : p.value);
    return `  - ${p.env}=${shown} ${p.problem}. Allowed: ${p.allowed}.`;
  });
  const count = problems.length === 1 ? '1 problem' : `${problems.length} problems`;
  return `Invalid configuration (${count}):\n${lines.join('\n')}`;
}

function shapeOf<T extends Record<string, { schema: z.ZodType }>>(fields: T): { [K in keyof T]: T[K]['schema'] } {
  const entries = Object.entries(fields).map(([key, f]) => [key, f.schema]);
  return Object.fromEntries(entries) as { [K in keyof T]: T[K]['schema'] };
}

const EnvSchema = z.object(shapeOf(FIELDS));
type ParsedEnv = z.output<typeof EnvSchema>;

// Relations between variables, checked only once every value is valid on its own (so the
// comparisons never see a malformed quantity).
function relationIssues(c: ParsedEnv): z.core.$ZodIssue[] {
  const issues: z.core.$ZodIssue[] = [];
  const add = (key: FieldKey, message: string): void => {
    issues.push({ code: 'custom', path: [key], message, input: undefined });
  };
  if (c.maxTimeoutSeconds < c.defaultTimeoutSeconds) {
    add('maxTimeoutSeconds', `must be at least CODEMODE_DEFAULT_TIMEOUT_SECONDS (${c.defaultTimeoutSeconds})`);
  }
  if (c.ttlSecondsAfterFinished > c.maxTtlSecondsAfterFinished) {
    add('ttlSecondsAfterFinished', `must not exceed CODEMODE_MAX_TTL_SECONDS_AFTER_FINISHED (${c.maxTtlSecondsAfterFinished})`);
  }
  if (parseQuantity(c.defaultCpu) > parseQuantity(c.maxCpu)) {
    add('defaultCpu', `must not exceed CODEMODE_MAX_CPU (${c.maxCpu})`);
  }
  if (parseQuantity(c.defaultMemory) > parseQuantity(c.maxMemory)) {
    add('defaultMemory', `must not exceed CODEMODE_MAX_MEMORY (${c.maxMemory})`);
  }
  if (c.authMode === 'none' && !isLoopbackBind(c.bindAddress) && !c.authNoneBeyondLoopback) {
    add(
      'authMode',
      `is none while CODEMODE_BIND_ADDRESS=${c.bindAddress} is beyond loopback, so anyone who reaches the gateway could run code; choose tokens, kubernetes or oidc, or set CODEMODE_AUTH_NONE_BEYOND_LOOPBACK=true to accept that`,
    );
  }
  if (c.authMode === 'oidc' && c.oidcIssuer === undefined) add('oidcIssuer', 'must be set when CODEMODE_AUTH_MODE=oidc');
  if (c.authMode === 'oidc' && c.oidcAudience === undefined) add('oidcAudience', 'must be set when CODEMODE_AUTH_MODE=oidc');
  if (c.maxConcurrentRuns > c.maxNamespaceRuns) {
    add('maxConcurrentRuns', `must not exceed CODEMODE_MAX_NAMESPACE_RUNS (${c.maxNamespaceRuns})`);
  }
  issues.push(...warmPoolIssues(c));
  return issues;
}

/** Default pool bounds: two ready pods, growing to eight under demand. */
const WARM_POOL_MIN_DEFAULT = 2;
const WARM_POOL_MAX_DEFAULT = 8;

// CODEMODE_WARM_POOL_SIZE is the pool's former (fixed) size, read as its minimum.
function warmPoolBounds(c: ParsedEnv): { warmPoolMin: number; warmPoolMax: number } {
  const min = c.warmPoolMin ?? c.warmPoolSize ?? WARM_POOL_MIN_DEFAULT;
  return { warmPoolMin: min, warmPoolMax: c.warmPoolMax ?? (min === 0 ? 0 : Math.max(WARM_POOL_MAX_DEFAULT, min)) };
}

function warmPoolIssues(c: ParsedEnv): z.core.$ZodIssue[] {
  const issue = (key: FieldKey, message: string): z.core.$ZodIssue => ({ code: 'custom', path: [key], message, input: undefined });
  if (c.warmPoolSize !== undefined && c.warmPoolMin !== undefined && c.warmPoolSize !== c.warmPoolMin) {
    return [issue('warmPoolSize', `is the former name of CODEMODE_WARM_POOL_MIN (${c.warmPoolMin}) and disagrees with it; set only CODEMODE_WARM_POOL_MIN`)];
  }
  const { warmPoolMin: min, warmPoolMax: max } = warmPoolBounds(c);
  const minKey: FieldKey = c.warmPoolMin === undefined && c.warmPoolSize !== undefined ? 'warmPoolSize' : 'warmPoolMin';
  if (min > max) return [issue(minKey, `must not exceed CODEMODE_WARM_POOL_MAX (${max})`)];
  if (min === 0 && max > 0) {
    return [
      issue(
        minKey,
        `must be at least 1 when CODEMODE_WARM_POOL_MAX (${max}) is above 0: the pool grows from claims of its own pods, so an empty pool would never start; set CODEMODE_WARM_POOL_MAX=0 to disable the pool`,
      ),
    ];
  }
  return [];
}

function problemOf(issue: z.core.$ZodIssue, env: NodeJS.ProcessEnv): ConfigProblem {
  const { doc } = FIELDS[issue.path[0] as FieldKey];
  let problem = describeIssue(issue);
  // List variables: say which entry is wrong.
  if (typeof issue.path[1] === 'number' && 'input' in issue) {
    problem = `entry ${JSON.stringify(issue.input)} ${problem}`;
  }
  return { env: doc.env, value: env[doc.env], problem, allowed: doc.allowed };
}

/** Reads every CODEMODE_* variable; throws ConfigError listing all bad variables at once. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const raw = Object.fromEntries(Object.entries(FIELDS).map(([key, f]) => [key, env[f.doc.env]]));
  const result = EnvSchema.safeParse(raw, { reportInput: true });
  const issues = result.success ? relationIssues(result.data) : result.error.issues;
  if (!result.success || issues.length > 0) throw new ConfigError(issues.map((i) => problemOf(i, env)));
  const c = result.data;
  const config: Config = {
    namespace: c.namespace,
    sandboxImage: c.sandboxImage,
    images: {
      python: c.imagePython ?? c.sandboxImage,
      bash: c.imageBash ?? c.sandboxImage,
      sh: c.imageSh ?? c.sandboxImage,
      node: c.imageNode ?? c.sandboxImage,
    },
    imagePullPolicy: c.imagePullPolicy,
    defaultTimeoutSeconds: c.defaultTimeoutSeconds,
    maxTimeoutSeconds: c.maxTimeoutSeconds,
    maxCodeBytes: c.maxCodeBytes,
    outputCapChars: c.outputCapChars,
    defaultCpu: c.defaultCpu,
    defaultMemory: c.defaultMemory,
    maxCpu: c.maxCpu,
    maxMemory: c.maxMemory,
    cpuRequest: c.cpuRequest,
    memoryRequest: c.memoryRequest,
    ephemeralStorageLimit: c.ephemeralStorageLimit,
    workspaceSizeLimit: c.workspaceSizeLimit,
    tmpSizeLimit: c.tmpSizeLimit,
    ttlSecondsAfterFinished: c.ttlSecondsAfterFinished,
    podStartupTimeoutSeconds: c.podStartupTimeoutSeconds,
    resyncSeconds: c.resyncSeconds,
    ...(c.runtimeClassName === undefined ? {} : { runtimeClassName: c.runtimeClassName }),
    bindAddress: c.bindAddress,
    port: c.port,
    allowedHosts: c.allowedHosts && c.allowedHosts.length > 0 ? c.allowedHosts : [...LOOPBACK_HOSTS],
    allowedOrigins: c.allowedOrigins ?? [],
    sessionMaxIdleTimeoutSeconds: c.sessionMaxIdleTimeoutSeconds,
    sessionMaxLifetimeSeconds: c.sessionMaxLifetimeSeconds,
    maxFileBytes: c.maxFileBytes,
    ...warmPoolBounds(c),
    warmPoolRefillDeferMs: c.warmPoolRefillDeferMs,
    logLevel: c.logLevel,
    authMode: c.authMode,
    authNoneBeyondLoopback: c.authNoneBeyondLoopback,
    authTokensSecret: c.authTokensSecret,
    ...(c.authAudience !== undefined && { authAudience: c.authAudience }),
    ...(c.oidcIssuer !== undefined && { oidcIssuer: c.oidcIssuer }),
    ...(c.oidcAudience !== undefined && { oidcAudience: c.oidcAudience }),
    ...(c.oidcJwksUrl !== undefined && { oidcJwksUrl: c.oidcJwksUrl }),
    oidcUsernameClaim: c.oidcUsernameClaim,
    oidcGroupsClaim: c.oidcGroupsClaim,
    ...(c.publicUrl !== undefined && { publicUrl: c.publicUrl.replace(/\/$/, '') }),
    adminGroups: c.adminGroups ?? [],
    sandboxCheckIntervalSeconds: c.sandboxCheckIntervalSeconds,
    maxProcesses: c.maxProcesses,
    acceptUnenforced: [...new Set(c.acceptUnenforced ?? [])],
    outputCapBytes: c.outputCapBytes,
    maxTtlSecondsAfterFinished: c.maxTtlSecondsAfterFinished,
    maxConcurrentRuns: c.maxConcurrentRuns,
    maxNamespaceRuns: c.maxNamespaceRuns,
    maxSessions: c.maxSessions,
    runQueueLength: c.runQueueLength,
    runQueueTimeoutSeconds: c.runQueueTimeoutSeconds,
    maxBatchSize: c.maxBatchSize,
  };
  return deepFreeze(config);
}

/** One row per variable, in a stable order; the README's configuration table comes from it. */
export const CONFIG_DOCS: Array<{ env: string; default: string; description: string; allowed: string }> = Object.values(FIELDS).map((f) => ({ ...f.doc }));

function cell(text: string): string {
  return text.replace(/\|/g, '\\|');
}

/** CONFIG_DOCS as a markdown table. */
export function describeConfigMarkdown(): string {
  const rows = CONFIG_DOCS.map(
    (d) => `| \`${d.env}\` | ${d.default === '' ? '(empty)' : `\`${cell(d.default)}\``} | ${cell(d.description)} | ${cell(d.allowed)} |`,
  );
  return ['| Variable | Default | Description | Allowed |', '| --- | --- | --- | --- |', ...rows].join('\n') + '\n';
}
