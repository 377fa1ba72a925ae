// What the gateway needs from the rest of the process. gatewayOptions() maps the global Config
// onto the narrow GatewayOptions so the gateway (and its tests) never depend on settings they do
// not use.
import type { Logger } from 'pino';
import type { Config } from '../config/index.js';
import type { AuthHttpOptions } from '../auth/middleware.js';
import type { RunService } from '../runs/types.js';
import type { ProfileCatalog } from '../profiles/catalog.js';
import type { SessionService } from '../sessions/service.js';
import type { SandboxGate } from '../selfcheck/checker.js';
import type { UpstreamRegistry } from '../upstreams/types.js';
import type { BodyBudgetLimits } from './body-budget.js';
import type { BodyCheckLimit } from './batch-limit.js';

const REQUIRED_OPTIONS = ['allowedHosts', 'allowedOrigins', 'defaultTimeoutSeconds', 'maxTimeoutSeconds', 'maxCodeBytes', 'maxBatchSize'] as const;
const OPTIONAL_OPTIONS = ['resultFormat', 'progressHeartbeatSeconds', 'maxFileBytes', 'userRequestsPerSecond'] as const;

/**
 * The gateway's settings (src/config/fields.ts documents each): allowed Host and Origin headers
 * (DNS-rebinding protection), the timeout applied when the agent sends none and the largest it may
 * ask for, the largest code, the most messages in one JSON-RPC batch, how often a long call's
 * progress stream says it is alive, the largest file read_file returns (what a read holds of
 * its user's share while it runs: body-budget.ts), and the requests a user may send a second.
 */
export type GatewayOptions = Pick<Config, (typeof REQUIRED_OPTIONS)[number]> & Partial<Pick<Config, (typeof OPTIONAL_OPTIONS)[number]>>;

/** The gateway's settings out of a loaded Config (or anything that has them): the required ones, and the optional ones that are set. */
export function gatewayOptions(config: GatewayOptions): GatewayOptions {
  const out: Record<string, unknown> = {};
  for (const k of REQUIRED_OPTIONS) out[k] = config[k];
  for (const k of OPTIONAL_OPTIONS) if (config[k] !== undefined) out[k] = config[k];
  return out as GatewayOptions;
}

export interface GatewayDeps {
  runService: RunService;
  /** Persistent sessions and their files; the session tools are offered only when present. */
  sessions?: Pick<SessionService, 'create' | 'list' | 'close' | 'readFile' | 'writeFile' | 'listFiles' | 'installPackages'>;
  options: GatewayOptions;
  logger: Logger;
  /**
   * The sandbox self-check: code is refused while the cluster does not enforce a protection the
   * administrator did not accept, and /readyz fails until the first check allowed code.
   */
  sandboxGate?: SandboxGate;
  /** True once the process can serve runs (caches synced, not draining); drives /readyz. */
  isReady(): boolean;
  /**
   * True while the process is shutting down: requests are still served (the operator stays up
   * until they stop coming), but every response closes its connection, so the client's next
   * request opens a new one through the Service, which no longer routes here.
   */
  isDraining?(): boolean;
  /**
   * Aborted when the process begins shutting down. A `subscriptions/listen` stream stays open as
   * long as its client likes, and the HTTP server cannot close while one is: open ones are ended
   * then (their clients listen again through the Service, on a replica that stays), and one opened
   * later is ended after its acknowledgement.
   */
  shutdown?: AbortSignal;
  /** The kinds of sandbox (SandboxProfiles): an OOM kill's advice names those with more memory. */
  profiles?: Pick<ProfileCatalog, 'resolve' | 'all'>;
  /** The team's upstream MCP servers (code mode): search_tools and the capability resource. */
  upstreams?: UpstreamRegistry;
  /** Authentication of /mcp (src/auth); without it every caller is anonymous (tests of tools). */
  auth?: AuthHttpOptions;
  /**
   * Told of every tool call that reached a tool (the tool's name, whether its result was an
   * error, seconds taken); main.ts feeds codemode_mcp_tool_calls_total and its latency histogram.
   */
  onToolCall?(tool: string, outcome: 'ok' | 'error', seconds: number): void;
  /** Bytes of request bodies in flight per user and per replica (body-budget.ts; default BODY_BUDGET_DEFAULTS). */
  bodyBudget?: BodyBudgetLimits;
  /** How long a response may have bytes waiting for its client without sending any (stall-guard.ts; default 60 s). */
  stalledResponseMs?: number;
  /**
   * Kept-alive connections one authenticated user may hold (connection-owners.ts); past it a
   * response closes its connection. Unset or 0: no share (no authentication, or tests of tools).
   */
  connectionsPerUser?: number;
  /** The window in which a request's body must bring its share of new bytes (body-progress.ts; default 15 s). */
  bodyProgressWindowMs?: number;
  /** Told of each request refused for capacity at the gateway (codemode_admission_rejections_total). */
  onAdmissionRejected?(limit: Exclude<BodyCheckLimit, 'json_shape' | 'body_progress'> | 'user_requests'): void;
  /**
   * Code mode: upstream MCP servers are configured, so execute_code takes `servers` and its
   * description explains the in-sandbox `codemode` API, with the per-run limits it states.
   */
  codeMode?: { maxCalls: number; callTimeoutSeconds: number };
}
