// The contract between code mode (src/codemode: nested tool calls from sandbox code) and the
// upstream side (src/upstreams: MCP client connections, catalogs, search). Only what the broker
// needs; the registry of UpstreamServers implements it, tests implement it with a real MCP client.
import type { Owner } from '../api/v1alpha1/index.js';

/** An upstream server a caller may use. `name` is admin-defined (a closed set: metric label). */
export interface ServerInfo {
  name: string;
  /** One line for the program (optional). */
  description?: string;
  /** Tools in its catalog now. */
  toolCount: number;
  /**
   * Why the server is not connected now (reconnecting, its Secrets being read), safe to show the
   * program; absent while it is. Its calls fail as `unavailable` ("retry later"), not `denied`.
   */
  notReady?: string;
}

/** One tool of an upstream's catalog, as tools/list gave it (allow/deny lists already applied). */
export interface ToolInfo {
  name: string;
  description?: string;
  /** JSON Schema of the arguments (an object schema). */
  inputSchema: Record<string, unknown>;
  outputSchema?: Record<string, unknown>;
}

/** A ranked search hit. */
export interface SearchHit {
  server: string;
  tool: string;
  score: number;
}

/** The MCP CallToolResult, as loose as the wire allows: the broker checks what it reads. */
export interface UpstreamResult {
  content?: unknown;
  structuredContent?: unknown;
  isError?: boolean;
}

export interface UpstreamCaller {
  /** The upstreams `owner` may use (all of them without an owner), ready or not (`notReady`). */
  servers(owner?: Owner): ServerInfo[];
  /**
   * The tools of one server, or undefined when there is no such server (for this owner). An array
   * once answered is never changed in place (the broker indexes it by name).
   */
  tools(server: string, owner?: Owner): readonly ToolInfo[] | undefined;
  /**
   * A token that changes whenever tools(server, owner) would answer differently, and that two
   * owners share only if their answers are equal; undefined when there is no such server (for
   * this owner). Optional: without it the broker keeps no describe() answers.
   */
  catalogVersion?(server: string, owner?: Owner): string | undefined;
  /** Ranked search over names and descriptions; optional: the broker ranks itself without it. */
  search?(query: string, options: { servers: readonly string[]; limit: number; owner?: Owner }): SearchHit[];
  /**
   * Calls a tool. Rejects when the upstream is unreachable or the call failed at the protocol
   * level, with an UpstreamError whose code says why (call-failures.ts); a tool's own failure is
   * a result with isError. Must honour `signal`.
   */
  call(
    server: string,
    tool: string,
    args: Record<string, unknown>,
    options: { signal: AbortSignal; timeoutMs: number; owner?: Owner },
  ): Promise<UpstreamResult>;
}
