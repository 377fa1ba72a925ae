import { describe, expect, it } from 'vitest';
import { CONFIG_DOCS, ConfigError, LOOPBACK_HOSTS, describeConfigMarkdown, loadConfig, parseQuantity } from '../../src/config/index.js';
import type { Config } from '../../src/config/index.js';

const IMAGE = 'codemode.local/sandbox:v1';

function configError(env: NodeJS.ProcessEnv): ConfigError {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error('expected a ConfigError');
}

describe('loadConfig defaults', () => {
  it('needs no environment at all', () => {
    expect(loadConfig({})).toEqual({
      namespace: 'codemode',
      sandboxImage: IMAGE,
      images: { python: IMAGE, bash: IMAGE, sh: IMAGE, node: IMAGE },
      imagePullPolicy: 'IfNotPresent',
      defaultTimeoutSeconds: 30,
      maxTimeoutSeconds: 300,
      maxCodeBytes: 262144,
      outputCapChars: 50000,
      defaultCpu: '1',
      defaultMemory: '512Mi',
      maxCpu: '2',
      maxMemory: '2Gi',
      cpuRequest: '100m',
      memoryRequest: '128Mi',
      ephemeralStorageLimit: '1Gi',
      workspaceSizeLimit: '512Mi',
      workspaceMedium: 'Disk',
      tmpSizeLimit: '128Mi',
      ttlSecondsAfterFinished: 3600,
      podStartupTimeoutSeconds: 120,
      resyncSeconds: 300,
      bindAddress: '127.0.0.1',
      port: 8080,
      allowedHosts: ['localhost', '127.0.0.1', '[::1]'],
      allowedOrigins: [],
      sessionMaxIdleTimeoutSeconds: 3600,
      sessionMaxLifetimeSeconds: 86400,
      maxFileBytes: 1048576,
      warmPoolMin: 2,
      warmPoolMax: 8,
      warmPoolRefillDeferMs: 1000,
      warmPoolReserve: 1,
      logLevel: 'info',
      authMode: 'none',
      authNoneBeyondLoopback: false,
      authTokensSecret: 'codemode-tokens',
      oidcUsernameClaim: 'sub',
      oidcGroupsClaim: 'groups',
      adminGroups: [],
      sandboxCheckIntervalSeconds: 600,
      maxProcesses: 128,
      acceptUnenforced: [],
      outputCapBytes: 65536,
      maxTtlSecondsAfterFinished: 86400,
      maxConcurrentRuns: 16,
      maxNamespaceRuns: 64,
      maxSessions: 32,
      runQueueLength: 32,
      runQueueTimeoutSeconds: 30,
      maxBatchSize: 10,
      userRequestsPerSecond: 0,
      progressHeartbeatSeconds: 15,
      maxConnections: 4096,
      userMaxRuns: 0,
      userMaxSessions: 0,
      userMaxExecutionsPerMinute: 0,
      auditQueueLength: 1000,
      auditTtlSeconds: 600,
      auditMaxRecords: 1000,
      auditMaxRecordsPerUser: 250,
      toolCallsPerRun: 100,
      toolCallTimeoutSeconds: 30,
      toolResultMaxBytes: 65536,
      toolBytesPerRun: 8388608,
      upstreamHealthIntervalSeconds: 15,
      upstreamRequestTimeoutSeconds: 10,
      upstreamMessageMaxBytes: 16777216,
      upstreamCallsPerServer: 64,
      upstreamCallsPerUser: 16,
      defaultProfile: 'default',
      resultFormat: 'text',
      displayMaxImageBytes: 2097152,
      displayMaxBytes: 5242880,
      displayMaxItems: 10,
      stdioBridgeImage: 'codemode.local/stdio-bridge:v1',
      stdioGatewayPodLabels: 'app.kubernetes.io/name=codemode-operator',
      packagesEcosystems: ['pypi', 'npm'],
      packagesAllow: [],
      packagesDeny: [],
      packagesMaxPackageBytes: 52428800,
      packagesMaxTotalBytes: 209715200,
      packagesPypiIndexUrl: 'https://pypi.org/simple',
      packagesNpmRegistry: 'https://registry.npmjs.org/',
      packagesCaFile: '/etc/ssl/certs/ca-certificates.crt',
      packagesEgressCidrs: ['0.0.0.0/0'],
      packagesEgressExcept: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16', '100.64.0.0/10'],
      packagesTimeoutSeconds: 300,
    } satisfies Config);
  });

  it('treats blank values as unset (Helm renders unset values as "")', () => {
    expect(loadConfig({ CODEMODE_PORT: '', CODEMODE_NAMESPACE: '  ', CODEMODE_RUNTIME_CLASS: '' })).toEqual(loadConfig({}));
  });

  it('is deeply frozen', () => {
    const config = loadConfig({ CODEMODE_ALLOWED_HOSTS: 'a.example' });
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.images)).toBe(true);
    expect(Object.isFrozen(config.allowedHosts)).toBe(true);
    expect(() => {
      (config as { port: number }).port = 1;
    }).toThrow(TypeError);
    expect(LOOPBACK_HOSTS).toEqual(['localhost', '127.0.0.1', '[::1]']);
  });
});

describe('loadConfig overrides', () => {
  it.each<[string, string, Partial<Config>]>([
    ['CODEMODE_NAMESPACE', 'sandboxes', { namespace: 'sandboxes' }],
    ['CODEMODE_SANDBOX_IMAGE', 'r.io/s:2', { sandboxImage: 'r.io/s:2', images: { python: 'r.io/s:2', bash: 'r.io/s:2', sh: 'r.io/s:2', node: 'r.io/s:2' } }],
    ['CODEMODE_IMAGE_PYTHON', 'py:3', { images: { python: 'py:3', bash: IMAGE, sh: IMAGE, node: IMAGE } }],
    ['CODEMODE_IMAGE_BASH', 'b:1', { images: { python: IMAGE, bash: 'b:1', sh: IMAGE, node: IMAGE } }],
    ['CODEMODE_IMAGE_SH', 's:1', { images: { python: IMAGE, bash: IMAGE, sh: 's:1', node: IMAGE } }],
    ['CODEMODE_IMAGE_NODE', 'n@sha256:abc', { images: { python: IMAGE, bash: IMAGE, sh: IMAGE, node: 'n@sha256:abc' } }],
    ['CODEMODE_IMAGE_PULL_POLICY', 'Never', { imagePullPolicy: 'Never' }],
    ['CODEMODE_DEFAULT_TIMEOUT_SECONDS', '60', { defaultTimeoutSeconds: 60 }],
    ['CODEMODE_MAX_TIMEOUT_SECONDS', '3600', { maxTimeoutSeconds: 3600 }],
    ['CODEMODE_MAX_CODE_BYTES', '1024', { maxCodeBytes: 1024 }],
    ['CODEMODE_OUTPUT_CAP_CHARS', '100', { outputCapChars: 100 }],
    ['CODEMODE_DEFAULT_CPU', '500m', { defaultCpu: '500m' }],
    ['CODEMODE_DEFAULT_MEMORY', '1Gi', { defaultMemory: '1Gi' }],
    ['CODEMODE_MAX_CPU', '4', { maxCpu: '4' }],
    ['CODEMODE_MAX_MEMORY', '8Gi', { maxMemory: '8Gi' }],
    ['CODEMODE_CPU_REQUEST', '0.25', { cpuRequest: '0.25' }],
    ['CODEMODE_MEMORY_REQUEST', '64Mi', { memoryRequest: '64Mi' }],
    ['CODEMODE_EPHEMERAL_STORAGE_LIMIT', '2Gi', { ephemeralStorageLimit: '2Gi' }],
    ['CODEMODE_WORKSPACE_SIZE_LIMIT', '1Gi', { workspaceSizeLimit: '1Gi' }],
    ['CODEMODE_TMP_SIZE_LIMIT', '64Mi', { tmpSizeLimit: '64Mi' }],
    ['CODEMODE_TTL_SECONDS_AFTER_FINISHED', '0', { ttlSecondsAfterFinished: 0 }],
    ['CODEMODE_POD_STARTUP_TIMEOUT_SECONDS', '30', { podStartupTimeoutSeconds: 30 }],
    ['CODEMODE_RESYNC_SECONDS', '60', { resyncSeconds: 60 }],
    ['CODEMODE_RUNTIME_CLASS', 'gvisor', { runtimeClassName: 'gvisor' }],
    ['CODEMODE_AUTH_MODE', 'kubernetes', { authMode: 'kubernetes' }],
    ['CODEMODE_PUBLIC_URL', 'https://mcp.example.com/', { publicUrl: 'https://mcp.example.com' }],
    ['CODEMODE_PORT', '0', { port: 0 }],
    ['CODEMODE_ALLOWED_HOSTS', 'MCP.example.com, [::1],', { allowedHosts: ['mcp.example.com', '[::1]'] }],
    ['CODEMODE_ALLOWED_ORIGINS', 'https://App.example.com/,http://localhost:3000', { allowedOrigins: ['https://app.example.com', 'http://localhost:3000'] }],
    ['CODEMODE_WARM_POOL_REFILL_DEFER_MS', '0', { warmPoolRefillDeferMs: 0 }],
    ['CODEMODE_AUDIT_TTL_SECONDS', '60', { auditTtlSeconds: 60 }],
    ['CODEMODE_AUDIT_MAX_RECORDS_PER_USER', '2', { auditMaxRecordsPerUser: 2 }],
    ['CODEMODE_TOOL_CALLS_PER_RUN', '3', { toolCallsPerRun: 3 }],
    ['CODEMODE_TOOL_RESULT_MAX_BYTES', '2048', { toolResultMaxBytes: 2048 }],
    ['CODEMODE_UPSTREAM_HEALTH_INTERVAL_SECONDS', '2', { upstreamHealthIntervalSeconds: 2 }],
    ['CODEMODE_UPSTREAM_REQUEST_TIMEOUT_SECONDS', '30', { upstreamRequestTimeoutSeconds: 30 }],
    ['CODEMODE_UPSTREAM_MESSAGE_MAX_BYTES', '1048576', { upstreamMessageMaxBytes: 1048576 }],
    ['CODEMODE_UPSTREAM_CALLS_PER_USER', '4', { upstreamCallsPerUser: 4 }],
    ['CODEMODE_RESULT_FORMAT', 'toon', { resultFormat: 'toon' }],
    ['CODEMODE_DISPLAY_MAX_IMAGE_BYTES', '65536', { displayMaxImageBytes: 65536 }],
    ['CODEMODE_DISPLAY_MAX_ITEMS', '0', { displayMaxItems: 0 }],
    ['CODEMODE_WARM_POOL_SIZE', '5', { warmPoolMin: 5, warmPoolMax: 8 }],
    ['CODEMODE_WARM_POOL_SIZE', '0', { warmPoolMin: 0, warmPoolMax: 0 }],
    ['CODEMODE_WARM_POOL_SIZE', '12', { warmPoolMin: 12, warmPoolMax: 12 }],
    ['CODEMODE_WARM_POOL_MIN', '1', { warmPoolMin: 1, warmPoolMax: 8 }],
    ['CODEMODE_WARM_POOL_MAX', '20', { warmPoolMin: 2, warmPoolMax: 20 }],
    ['CODEMODE_LOG_LEVEL', 'debug', { logLevel: 'debug' }],
    ['CODEMODE_SANDBOX_CHECK_INTERVAL_SECONDS', '60', { sandboxCheckIntervalSeconds: 60 }],
    ['CODEMODE_MAX_PROCESSES', '256', { maxProcesses: 256 }],
    ['CODEMODE_ACCEPT_UNENFORCED', 'network, process_limit,network', { acceptUnenforced: ['network', 'process_limit'] }],
    ['CODEMODE_OUTPUT_CAP_BYTES', '262144', { outputCapBytes: 262144 }],
    ['CODEMODE_MAX_TTL_SECONDS_AFTER_FINISHED', '604800', { maxTtlSecondsAfterFinished: 604800 }],
    ['CODEMODE_MAX_CONCURRENT_RUNS', '8', { maxConcurrentRuns: 8 }],
    ['CODEMODE_MAX_NAMESPACE_RUNS', '200', { maxNamespaceRuns: 200 }],
    ['CODEMODE_USER_MAX_RUNS', '3', { userMaxRuns: 3 }],
    ['CODEMODE_USER_MAX_EXECUTIONS_PER_MINUTE', '0', { userMaxExecutionsPerMinute: 0 }],
    ['CODEMODE_MAX_SESSIONS', '5', { maxSessions: 5 }],
    ['CODEMODE_RUN_QUEUE_LENGTH', '0', { runQueueLength: 0 }],
    ['CODEMODE_RUN_QUEUE_TIMEOUT_SECONDS', '5', { runQueueTimeoutSeconds: 5 }],
    ['CODEMODE_MAX_BATCH_SIZE', '1', { maxBatchSize: 1 }],
    ['CODEMODE_USER_REQUESTS_PER_SECOND', '20', { userRequestsPerSecond: 20 }],
    ['CODEMODE_PROGRESS_HEARTBEAT_SECONDS', '0', { progressHeartbeatSeconds: 0 }],
    ['CODEMODE_MAX_CONNECTIONS', '200', { maxConnections: 200 }],
  ])('%s=%s', (env, value, expected) => {
    expect(loadConfig({ [env]: value })).toMatchObject(expected);
  });

  it('documents every variable it reads', () => {
    const envs = CONFIG_DOCS.map((d) => d.env);
    expect(new Set(envs).size).toBe(envs.length);
    for (const env of envs) expect(env).toMatch(/^CODEMODE_[A-Z_]+$/);
    expect(envs).toHaveLength(100);
  });
});

describe('loadConfig errors', () => {
  it.each<[string, string, string]>([
    ['CODEMODE_NAMESPACE', 'Bad_NS', 'must be a DNS-1123 label'],
    ['CODEMODE_SANDBOX_IMAGE', 'has space', 'must be a container image reference'],
    ['CODEMODE_IMAGE_PYTHON', '-bad', 'must be a container image reference'],
    ['CODEMODE_IMAGE_PULL_POLICY', 'Sometimes', 'must be one of "Always", "IfNotPresent", "Never"'],
    ['CODEMODE_RESULT_FORMAT', 'yaml', 'must be one of "text", "json", "toon"'],
    ['CODEMODE_DISPLAY_MAX_IMAGE_BYTES', '100', 'must be at least 1024'],
    ['CODEMODE_DISPLAY_MAX_BYTES', '99999999999', 'must be at most 33554432'],
    ['CODEMODE_DEFAULT_TIMEOUT_SECONDS', '0', 'must be at least 1'],
    ['CODEMODE_MAX_TIMEOUT_SECONDS', '3601', 'must be at most 3600'],
    ['CODEMODE_SESSION_MAX_IDLE_TIMEOUT_SECONDS', '5', 'must be at least 10'],
    ['CODEMODE_SESSION_MAX_LIFETIME_SECONDS', 'forever', 'must be a whole number'],
    ['CODEMODE_MAX_FILE_BYTES', '0', 'must be at least 1'],
    ['CODEMODE_MAX_CODE_BYTES', '262145', 'must be at most 262144'],
    ['CODEMODE_OUTPUT_CAP_CHARS', '1e3', 'must be a whole number'],
    ['CODEMODE_DEFAULT_CPU', '1 core', 'must be a Kubernetes quantity'],
    ['CODEMODE_MAX_MEMORY', '0', 'must be greater than zero'],
    ['CODEMODE_DEFAULT_MEMORY', '512m', 'must be at least 16Mi, e.g. 512Mi (a lowercase m means thousandths: 512m is half a byte)'],
    ['CODEMODE_MAX_MEMORY', '1', 'must be at least 16Mi'],
    ['CODEMODE_MEMORY_REQUEST', '512k', 'must be at least 16Mi'],
    ['CODEMODE_CPU_REQUEST', '-1', 'must be a Kubernetes quantity'],
    ['CODEMODE_MEMORY_REQUEST', '1Zi', 'must be a Kubernetes quantity'],
    ['CODEMODE_EPHEMERAL_STORAGE_LIMIT', 'lots', 'must be a Kubernetes quantity'],
    ['CODEMODE_WORKSPACE_SIZE_LIMIT', '1GB', 'must be a Kubernetes quantity'],
    ['CODEMODE_TMP_SIZE_LIMIT', '0Mi', 'must be greater than zero'],
    ['CODEMODE_TTL_SECONDS_AFTER_FINISHED', '-5', 'must be a whole number'],
    ['CODEMODE_POD_STARTUP_TIMEOUT_SECONDS', 'soon', 'must be a whole number'],
    ['CODEMODE_RESYNC_SECONDS', '0', 'must be at least 1'],
    ['CODEMODE_RUNTIME_CLASS', 'gVisor', 'must be a DNS-1123 subdomain'],
    ['CODEMODE_BIND_ADDRESS', 'http://0.0.0.0', 'must be an IP address or host name'],
    ['CODEMODE_PORT', '65536', 'must be at most 65535'],
    ['CODEMODE_ALLOWED_HOSTS', 'ok.example,bad host:80', 'entry "bad host:80" must be a host name'],
    ['CODEMODE_ALLOWED_ORIGINS', 'https://a.example/path', 'entry "https://a.example/path" must be an origin'],
    ['CODEMODE_WARM_POOL_REFILL_DEFER_MS', '10001', 'must be at most 10000'],
    ['CODEMODE_LOG_LEVEL', 'loud', 'must be one of "trace", "debug", "info", "warn", "error"'],
    ['CODEMODE_AUTH_MODE', 'basic', 'must be one of "none", "tokens", "kubernetes", "oidc"'],
    ['CODEMODE_AUTH_NONE_BEYOND_LOOPBACK', 'yes', 'must be one of "true", "false"'],
    ['CODEMODE_AUTH_TOKENS_SECRET', 'My_Secret', 'must be a DNS-1123 subdomain'],
    ['CODEMODE_OIDC_USERNAME_CLAIM', 'a b', 'must be a claim name'],
    ['CODEMODE_PUBLIC_URL', 'mcp.example.com', 'must be a valid url'],
    ['CODEMODE_SANDBOX_CHECK_INTERVAL_SECONDS', '5', 'must be at least 10'],
    ['CODEMODE_MAX_PROCESSES', '0', 'must be at least 8'],
    ['CODEMODE_ACCEPT_UNENFORCED', 'network,everything', 'entry "everything" must be one of'],
    ['CODEMODE_OUTPUT_CAP_BYTES', '262145', 'must be at most 262144'],
    ['CODEMODE_MAX_TTL_SECONDS_AFTER_FINISHED', '604801', 'must be at most 604800'],
    ['CODEMODE_MAX_CONCURRENT_RUNS', '0', 'must be at least 1'],
    ['CODEMODE_MAX_SESSIONS', 'many', 'must be a whole number'],
    ['CODEMODE_RUN_QUEUE_TIMEOUT_SECONDS', '601', 'must be at most 600'],
    ['CODEMODE_MAX_BATCH_SIZE', '101', 'must be at most 100'],
    ['CODEMODE_USER_REQUESTS_PER_SECOND', '100001', 'must be at most 100000'],
    ['CODEMODE_PROGRESS_HEARTBEAT_SECONDS', '301', 'must be at most 300'],
    ['CODEMODE_MAX_CONNECTIONS', '15', 'must be at least 16'],
    ['CODEMODE_USERNAME_PREFIX', 'g w:', 'must not contain spaces, commas or control characters'],
    ['CODEMODE_USERNAME_PREFIX', 'system:gw:', 'must not start with system:'],
    ['CODEMODE_GROUPS_PREFIX', 'a,b:', 'must not contain spaces, commas or control characters'],
    ['CODEMODE_GROUPS_PREFIX', 'g'.repeat(65), 'must be at most 64 characters'],
  ])('%s=%s', (env, value, problem) => {
    const err = configError({ [env]: value });
    expect(err.problems).toHaveLength(1);
    expect(err.problems[0]).toMatchObject({ env, value });
    expect(err.message).toContain(`${env}=${JSON.stringify(value)} ${problem}`);
    expect(err.message).toContain(`Allowed: ${CONFIG_DOCS.find((d) => d.env === env)?.allowed}`);
  });

  it.each<[NodeJS.ProcessEnv, string]>([
    [{ CODEMODE_MAX_TIMEOUT_SECONDS: '10' }, 'CODEMODE_MAX_TIMEOUT_SECONDS="10" must be at least CODEMODE_DEFAULT_TIMEOUT_SECONDS (30)'],
    [{ CODEMODE_MAX_CPU: '500m' }, 'CODEMODE_DEFAULT_CPU=(default) must not exceed CODEMODE_MAX_CPU (500m)'],
    [{ CODEMODE_DEFAULT_MEMORY: '3Gi' }, 'CODEMODE_DEFAULT_MEMORY="3Gi" must not exceed CODEMODE_MAX_MEMORY (2Gi)'],
    [{ CODEMODE_BIND_ADDRESS: '0.0.0.0' }, 'CODEMODE_AUTH_MODE=(default) is none while CODEMODE_BIND_ADDRESS=0.0.0.0 is beyond loopback'],
    [{ CODEMODE_AUTH_MODE: 'oidc', CODEMODE_OIDC_AUDIENCE: 'x' }, 'CODEMODE_OIDC_ISSUER=(default) must be set when CODEMODE_AUTH_MODE=oidc'],
    [
      { CODEMODE_AUTH_MODE: 'oidc', CODEMODE_OIDC_ISSUER: 'https://issuer.example' },
      'CODEMODE_OIDC_AUDIENCE=(default) must be set when CODEMODE_AUTH_MODE=oidc',
    ],
    [
      { CODEMODE_MAX_TTL_SECONDS_AFTER_FINISHED: '60' },
      'CODEMODE_TTL_SECONDS_AFTER_FINISHED=(default) must not exceed CODEMODE_MAX_TTL_SECONDS_AFTER_FINISHED (60)',
    ],
    [{ CODEMODE_MAX_NAMESPACE_RUNS: '8' }, 'CODEMODE_MAX_CONCURRENT_RUNS=(default) must not exceed CODEMODE_MAX_NAMESPACE_RUNS (8)'],
    [{ CODEMODE_WARM_POOL_MIN: '4', CODEMODE_WARM_POOL_MAX: '3' }, 'CODEMODE_WARM_POOL_MIN="4" must not exceed CODEMODE_WARM_POOL_MAX (3)'],
    [{ CODEMODE_WARM_POOL_SIZE: '4', CODEMODE_WARM_POOL_MAX: '3' }, 'CODEMODE_WARM_POOL_SIZE="4" must not exceed CODEMODE_WARM_POOL_MAX (3)'],
    [{ CODEMODE_WARM_POOL_MAX: '1' }, 'CODEMODE_WARM_POOL_MIN=(default) must not exceed CODEMODE_WARM_POOL_MAX (1)'],
    [{ CODEMODE_WARM_POOL_MIN: '0', CODEMODE_WARM_POOL_MAX: '8' }, 'CODEMODE_WARM_POOL_MIN="0" must be at least 1 when CODEMODE_WARM_POOL_MAX (8) is above 0'],
    [
      { CODEMODE_WARM_POOL_SIZE: '2', CODEMODE_WARM_POOL_MIN: '3' },
      'CODEMODE_WARM_POOL_SIZE="2" is the former name of CODEMODE_WARM_POOL_MIN (3) and disagrees with it; set only CODEMODE_WARM_POOL_MIN',
    ],
    [
      { CODEMODE_USERNAME_PREFIX: 'gw:' },
      'CODEMODE_USERNAME_PREFIX="gw:" applies to the names the gateway authenticates itself (CODEMODE_AUTH_MODE tokens or oidc); mode none takes its names as they are: unset it',
    ],
    [{ CODEMODE_AUTH_MODE: 'kubernetes', CODEMODE_GROUPS_PREFIX: 'gw:' }, 'CODEMODE_GROUPS_PREFIX="gw:" applies to the names the gateway authenticates itself'],
  ])('checks relations between variables: %j', (env, message) => {
    expect(configError(env).message).toContain(message);
  });

  it.each<[NodeJS.ProcessEnv, Partial<Config>]>([
    [
      { CODEMODE_BIND_ADDRESS: '0.0.0.0', CODEMODE_AUTH_NONE_BEYOND_LOOPBACK: 'true' },
      { bindAddress: '0.0.0.0', authMode: 'none', authNoneBeyondLoopback: true },
    ],
    [
      { CODEMODE_BIND_ADDRESS: '0.0.0.0', CODEMODE_AUTH_MODE: 'tokens' },
      { bindAddress: '0.0.0.0', authMode: 'tokens' },
    ],
    [{ CODEMODE_BIND_ADDRESS: '127.0.0.2' }, { bindAddress: '127.0.0.2', authMode: 'none' }],
  ])('accepts an unauthenticated gateway beyond loopback only when told to: %j', (env, expected) => {
    expect(loadConfig(env)).toMatchObject(expected);
  });

  // Unset, the per-user runs and sessions limits are a quarter of the namespace's on an
  // authenticated endpoint, its request rate 200 a second, and all off without authentication
  // (every caller is one user).
  it.each<[string, NodeJS.ProcessEnv, Partial<Pick<Config, 'userMaxRuns' | 'userMaxSessions' | 'userRequestsPerSecond'>>]>([
    ['no authentication: none', {}, { userMaxRuns: 0, userMaxSessions: 0, userRequestsPerSecond: 0 }],
    ['tokens: a quarter of the caps', { CODEMODE_AUTH_MODE: 'tokens' }, { userMaxRuns: 4, userMaxSessions: 8, userRequestsPerSecond: 200 }],
    [
      'oidc: 200 requests a second',
      { CODEMODE_AUTH_MODE: 'oidc', CODEMODE_OIDC_ISSUER: 'https://issuer.example', CODEMODE_OIDC_AUDIENCE: 'x' },
      { userRequestsPerSecond: 200 },
    ],
    ['requests set: as set', { CODEMODE_AUTH_MODE: 'tokens', CODEMODE_USER_REQUESTS_PER_SECOND: '0' }, { userRequestsPerSecond: 0 }],
    ['requests set without authentication', { CODEMODE_USER_REQUESTS_PER_SECOND: '7' }, { userRequestsPerSecond: 7 }],
    [
      'kubernetes, other caps',
      { CODEMODE_AUTH_MODE: 'kubernetes', CODEMODE_MAX_CONCURRENT_RUNS: '10', CODEMODE_MAX_NAMESPACE_RUNS: '10', CODEMODE_MAX_SESSIONS: '2' },
      { userMaxRuns: 2, userMaxSessions: 1 },
    ],
    [
      'at least one',
      { CODEMODE_AUTH_MODE: 'tokens', CODEMODE_MAX_CONCURRENT_RUNS: '1', CODEMODE_MAX_NAMESPACE_RUNS: '1', CODEMODE_MAX_SESSIONS: '1' },
      { userMaxRuns: 1, userMaxSessions: 1 },
    ],
    [
      'set: as set, 0 turning the limit off',
      { CODEMODE_AUTH_MODE: 'tokens', CODEMODE_USER_MAX_RUNS: '0', CODEMODE_USER_MAX_SESSIONS: '30' },
      { userMaxRuns: 0, userMaxSessions: 30 },
    ],
    ['set without authentication', { CODEMODE_USER_MAX_RUNS: '2', CODEMODE_USER_MAX_SESSIONS: '3' }, { userMaxRuns: 2, userMaxSessions: 3 }],
  ])('per-user limits, %s', (_name, env, expected) => {
    expect(loadConfig(env)).toMatchObject(expected);
  });

  it('reports every bad variable at once', () => {
    const err = configError({ CODEMODE_PORT: 'x', CODEMODE_LOG_LEVEL: 'loud', CODEMODE_MAX_CPU: 'abc' });
    expect(err.message).toMatch(/^Invalid configuration \(3 problems\):/);
    expect(err.problems.map((p) => p.env).sort()).toEqual(['CODEMODE_LOG_LEVEL', 'CODEMODE_MAX_CPU', 'CODEMODE_PORT']);
  });
});

describe('parseQuantity', () => {
  it.each<[string, number]>([
    ['1', 1],
    ['2.5', 2.5],
    ['.5', 0.5],
    ['100m', 0.1],
    ['1500m', 1.5],
    ['1k', 1000],
    ['1M', 1e6],
    ['1G', 1e9],
    ['1T', 1e12],
    ['1Ki', 1024],
    ['512Mi', 512 * 2 ** 20],
    ['2Gi', 2 * 2 ** 30],
    ['1Ti', 2 ** 40],
  ])('%s → %d', (q, expected) => {
    expect(parseQuantity(q)).toBeCloseTo(expected, 9);
  });

  it.each(['', 'abc', '1 Gi', '-1', '1e3', '1Pi', '1GB'])('rejects %j', (q) => {
    expect(() => parseQuantity(q)).toThrow(/Invalid quantity/);
  });
});

describe('describeConfigMarkdown', () => {
  it('renders one row per variable', () => {
    const lines = describeConfigMarkdown().trimEnd().split('\n');
    expect(lines[0]).toBe('| Variable | Default | Description | Allowed |');
    expect(lines).toHaveLength(CONFIG_DOCS.length + 2);
    expect(lines).toContain('| `CODEMODE_PORT` | `8080` | Port the MCP gateway listens on (0 picks a free port). | an integer from 0 to 65535 |');
  });
});
