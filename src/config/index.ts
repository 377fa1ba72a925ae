// The only reader of process.env. Configuration is parsed once at startup into a deeply frozen
// object and passed down; nothing else looks at the environment, so tests pass a plain object.
import { z } from 'zod';
import { describeIssue } from '../api/v1alpha1/index.js';
import type { Runtime } from '../api/v1alpha1/index.js';
import { deepFreeze, type DeepReadonly } from '../util/deep-freeze.js';
import { FIELDS } from './fields.js';
import type { FieldKey } from './fields.js';
import { parseQuantity } from './quantity.js';

export { parseQuantity } from './quantity.js';

/** Host names the gateway accepts when CODEMODE_ALLOWED_HOSTS is empty. */
export const LOOPBACK_HOSTS: readonly string[] = Object.freeze(['localhost', '127.0.0.1', '[::1]']);

/** Addresses that only this machine can reach. */
export function isLoopbackBind(address: string): boolean {
  return address === 'localhost' || address === '::1' || address === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(address);
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
  for (const key of ['usernamePrefix', 'groupsPrefix'] as const) {
    if (c[key] !== undefined && c.authMode !== 'tokens' && c.authMode !== 'oidc') {
      add(
        key,
        `applies to the names the gateway authenticates itself (CODEMODE_AUTH_MODE tokens or oidc); mode ${c.authMode} takes its names as they are: unset it`,
      );
    }
  }
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
function warmPoolBounds(c: Pick<ParsedEnv, 'warmPoolSize' | 'warmPoolMin' | 'warmPoolMax'>): { warmPoolMin: number; warmPoolMax: number } {
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

// The parsed variables become the Config: every field passes through as parsed, except the few
// that are resolved from others (images fall back to CODEMODE_SANDBOX_IMAGE, pool bounds from the
// former CODEMODE_WARM_POOL_SIZE) or normalised. A new variable in FIELDS is in Config without
// being declared again.
function toConfig(c: ParsedEnv) {
  const {
    imagePython,
    imageBash,
    imageSh,
    imageNode,
    warmPoolSize,
    warmPoolMin,
    warmPoolMax,
    allowedHosts,
    allowedOrigins,
    publicUrl,
    adminGroups,
    acceptUnenforced,
    userMaxRuns,
    userMaxSessions,
    userRequestsPerSecond,
    ...rest
  } = c;
  // Unset per-user limits: a quarter of the namespace's, with authentication (fields.ts).
  const quarter = (n: number): number => (c.authMode === 'none' ? 0 : Math.max(1, Math.floor(n / 4)));
  const images: Record<Runtime, string> = {
    python: imagePython ?? c.sandboxImage,
    bash: imageBash ?? c.sandboxImage,
    sh: imageSh ?? c.sandboxImage,
    node: imageNode ?? c.sandboxImage,
  };
  return {
    ...rest,
    /** Image per runtime, already resolved (falls back to sandboxImage). */
    images,
    /** Lowercase host names without port; LOOPBACK_HOSTS when the variable is empty. */
    allowedHosts: allowedHosts && allowedHosts.length > 0 ? allowedHosts : [...LOOPBACK_HOSTS],
    /** Normalized origins (`https://host[:port]`); empty means no browser origin is allowed. */
    allowedOrigins: allowedOrigins ?? [],
    ...(publicUrl !== undefined && { publicUrl: publicUrl.replace(/\/$/, '') }),
    adminGroups: adminGroups ?? [],
    /** Checks whose absence the administrator accepted (code runs anyway, with a warning). */
    acceptUnenforced: [...new Set(acceptUnenforced ?? [])],
    /** warmPoolMin: fewest pool pods kept; warmPoolMax: most under demand (0 disables and drains the pool). */
    ...warmPoolBounds({ warmPoolSize, warmPoolMin, warmPoolMax }),
    /** Transient runs one user may have executing (0: no limit); unset, a quarter of the replica's or namespace's, with authentication. */
    userMaxRuns: userMaxRuns ?? quarter(Math.min(c.maxConcurrentRuns, c.maxNamespaceRuns)),
    /** Live sessions one user may own (0: no limit); unset, a quarter of maxSessions with authentication. */
    userMaxSessions: userMaxSessions ?? quarter(c.maxSessions),
    /** Requests one user may send this replica a second (0: no limit); unset, DEFAULT_USER_REQUESTS_PER_SECOND with authentication. */
    userRequestsPerSecond: userRequestsPerSecond ?? (c.authMode === 'none' ? 0 : DEFAULT_USER_REQUESTS_PER_SECOND),
  };
}

/** CODEMODE_USER_REQUESTS_PER_SECOND when unset on an authenticated endpoint (fields.ts says why). */
export const DEFAULT_USER_REQUESTS_PER_SECOND = 200;

/** The loaded configuration: derived from the field schemas (src/config/fields.ts), deeply read-only. */
export type Config = DeepReadonly<ReturnType<typeof toConfig>>;

/** Reads every CODEMODE_* variable; throws ConfigError listing all bad variables at once. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const raw = Object.fromEntries(Object.entries(FIELDS).map(([key, f]) => [key, env[f.doc.env]]));
  const result = EnvSchema.safeParse(raw, { reportInput: true });
  const issues = result.success ? relationIssues(result.data) : result.error.issues;
  if (!result.success || issues.length > 0) throw new ConfigError(issues.map((i) => problemOf(i, env)));
  return deepFreeze(toConfig(result.data));
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
