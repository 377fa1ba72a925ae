// What the gateway needs from the rest of the process. gatewayOptions() maps the global Config
// onto the narrow GatewayOptions so the gateway (and its tests) never depend on settings they do
// not use.
import type { Logger } from 'pino';
import type { AuthHttpOptions } from '../auth/middleware.js';
import type { RunService } from '../runs/types.js';
import type { SessionService } from '../sessions/service.js';
import type { SandboxGate } from '../selfcheck/checker.js';

export interface GatewayOptions {
  /**
   * Host header values accepted on /mcp besides the loopback names (DNS-rebinding protection).
   * A bare name (`codemode.example.com`) matches any port; `name:port` matches that port only.
   */
  allowedHosts: readonly string[];
  /**
   * Origin header values accepted on /mcp besides loopback origins. A full origin
   * (`https://app.example.com`) must match exactly; a bare hostname matches any scheme and port.
   */
  allowedOrigins: readonly string[];
  /** Timeout applied when the agent does not send timeout_seconds. */
  defaultTimeoutSeconds: number;
  /** Largest timeout_seconds an agent may ask for. */
  maxTimeoutSeconds: number;
  /** Largest submitted code (and stdin), in UTF-8 bytes. */
  maxCodeBytes: number;
  /** Most messages in one JSON-RPC batch (CODEMODE_MAX_BATCH_SIZE). */
  maxBatchSize: number;
}

/** The gateway's settings out of a loaded Config (or anything that has them). */
export function gatewayOptions(config: GatewayOptions): GatewayOptions {
  const { allowedHosts, allowedOrigins, defaultTimeoutSeconds, maxTimeoutSeconds, maxCodeBytes, maxBatchSize } = config;
  return { allowedHosts, allowedOrigins, defaultTimeoutSeconds, maxTimeoutSeconds, maxCodeBytes, maxBatchSize };
}

export interface GatewayDeps {
  runService: RunService;
  /** Persistent sessions and their files; the session tools are offered only when present. */
  sessions?: Pick<SessionService, 'create' | 'list' | 'close' | 'readFile' | 'writeFile' | 'listFiles'>;
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
  /** Authentication of /mcp (src/auth); without it every caller is anonymous (tests of tools). */
  auth?: AuthHttpOptions;
  /**
   * Told of every tool call that reached a tool (the tool's name, whether its result was an
   * error, seconds taken); main.ts feeds codemode_mcp_tool_calls_total and its latency histogram.
   */
  onToolCall?(tool: string, outcome: 'ok' | 'error', seconds: number): void;
  /** Told of each request refused for capacity at the gateway (codemode_admission_rejections_total). */
  onAdmissionRejected?(limit: 'batch_size'): void;
}
