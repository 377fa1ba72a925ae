// What the rest of the gateway (the search_tools tool, the capability resource, the code-mode
// broker) may know of the team's upstream MCP servers. Types only plus one error class: importing
// this file pulls in neither client-node nor the MCP client.
import type { CallToolResult } from '@modelcontextprotocol/client';

/** Who asks: the authenticated caller (src/auth Identity, or a run's spec.owner). */
export interface Caller {
  user: string;
  groups?: readonly string[];
}

/** One upstream as a caller may see it (never its URL's credentials, headers or Secret names). */
export interface UpstreamServerInfo {
  /** The UpstreamServer's metadata.name: how code names the server. */
  name: string;
  ready: boolean;
  /** The Ready condition's reason (UpstreamReasons in src/api). */
  reason: string;
  /** Why not ready, safe to show a caller (secrets removed); absent when ready. */
  message?: string;
  /** Tools offered after the allow and deny lists. */
  toolCount: number;
  /** spec.callTimeoutSeconds in ms: the longest one call may take. */
  callTimeoutMs: number;
}

/** A tool of an upstream, as the upstream listed it (already filtered by allow and deny). */
export interface UpstreamTool {
  server: string;
  name: string;
  title?: string;
  description?: string;
  /** JSON Schema of the arguments (an object schema). */
  inputSchema: Record<string, unknown>;
  outputSchema?: Record<string, unknown>;
  annotations?: Record<string, unknown>;
}

/** A search hit: enough to write the call without reading the full schema. */
export interface ToolSignature {
  server: string;
  name: string;
  /** The first sentence of the description, at most ~160 characters. */
  summary: string;
  /** Compact parameters, e.g. `(message: string, count?: integer = 1)`. */
  signature: string;
  score: number;
}

/** describe() detail: just the name, the signature and summary, or everything the upstream listed. */
export type DetailLevel = 'name' | 'summary' | 'full';

export type ToolDescription =
  | { level: 'name'; server: string; name: string }
  | { level: 'summary'; server: string; name: string; summary: string; signature: string }
  | {
      level: 'full';
      server: string;
      name: string;
      title?: string;
      description: string;
      signature: string;
      inputSchema: Record<string, unknown>;
      outputSchema?: Record<string, unknown>;
      annotations?: Record<string, unknown>;
    };

export interface SearchOptions {
  /** Most hits returned (default 10). */
  limit?: number;
  /** Only these upstreams (default: every one the caller may use). */
  servers?: readonly string[];
}

export interface CallOptions {
  /** Aborts the call (the run ended or was cancelled). */
  signal?: AbortSignal;
  /** The caller's own bound; the upstream's callTimeoutSeconds applies when shorter. */
  timeoutMs?: number;
}

/**
 * The gateway's view of the upstreams. Every method checks the caller: a server the caller may
 * not use answers exactly like a server that does not exist ('unknown_server').
 */
export interface UpstreamRegistry {
  /** The upstreams `caller` may use, ready or not, sorted by name. */
  servers(caller: Caller | undefined): UpstreamServerInfo[];
  /** The cached catalog of one upstream (empty while it is not ready). Throws UpstreamError. */
  catalog(caller: Caller | undefined, server: string): readonly UpstreamTool[];
  /**
   * A token that changes whenever catalog(…, server) would answer differently, equal for every
   * caller allowed to use the server only if their catalogs are equal (so answers made from a
   * catalog can be kept per server and version). Throws UpstreamError like catalog(). Optional.
   */
  catalogVersion?(caller: Caller | undefined, server: string): string;
  /** Ranked search over tool names, titles and descriptions of the caller's ready upstreams. */
  search(caller: Caller | undefined, query: string, options?: SearchOptions): ToolSignature[];
  /** One tool at a detail level. Throws UpstreamError (unknown_server, unknown_tool, tool_denied). */
  describe(caller: Caller | undefined, server: string, tool: string, level: DetailLevel): ToolDescription;
  /**
   * Calls a tool: checks the caller, the allow/deny lists and the catalog, then calls the upstream
   * with its Secret headers and the shorter of the two timeouts. A tool's own failure is a result
   * with isError (as the upstream sent it); everything else throws UpstreamError.
   */
  call(caller: Caller | undefined, server: string, tool: string, args: Record<string, unknown>, options?: CallOptions): Promise<CallToolResult>;
  /** Told whenever any server's catalog or readiness changes (e.g. to rebuild a description). */
  onChange(listener: () => void): () => void;
}

export type UpstreamErrorCode =
  /** No such server, or the caller may not use it (indistinguishable on purpose). */
  | 'unknown_server'
  /** The server is known but not connected (status Ready False); retry later. */
  | 'not_ready'
  /** The allow/deny lists of the UpstreamServer exclude the tool. */
  | 'tool_denied'
  /** The tool is not in the server's catalog. */
  | 'unknown_tool'
  /** The call took longer than the shorter of callTimeoutSeconds and the caller's timeout. */
  | 'timeout'
  /** The caller's signal aborted the call. */
  | 'aborted'
  /** Too many of the caller's calls to this upstream wait already (call-gate.ts). */
  | 'busy'
  /** The caller's searches took their share of the gateway's thread (USER_SEARCH_MS_PER_SECOND); retry later. */
  | 'search_limit'
  /** The upstream failed at the protocol or transport level (not a tool error). */
  | 'upstream_failed';

/** A call that could not be made or did not complete; `message` is safe to show the caller. */
export class UpstreamError extends Error {
  constructor(
    readonly code: UpstreamErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'UpstreamError';
  }
}
