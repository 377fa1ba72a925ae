// The UpstreamRegistry the gateway and the broker use: per-caller views over the upstreams the
// watcher (watcher.ts) keeps current. No Kubernetes here: entries are set and removed by the
// watcher, so this file is tested with plain objects.
import type { CallToolResult } from '@modelcontextprotocol/client';
import type { UpstreamServerSpec } from '../api/v1alpha1/index.js';
import { CallGate, type CallGateLimits } from './call-gate.js';
import { mayUse, type ToolFilter } from './policy.js';
import { DEFAULT_SEARCH_LIMIT, ToolSearch } from './search.js';
import { describeTool } from './signature.js';
import {
  UpstreamError,
  type CallOptions,
  type Caller,
  type DetailLevel,
  type SearchOptions,
  type ToolDescription,
  type ToolSignature,
  type UpstreamRegistry,
  type UpstreamServerInfo,
  type UpstreamTool,
} from './types.js';

/** One upstream as the watcher last saw it. `tools` are already filtered by allow and deny. */
export interface UpstreamEntry {
  name: string;
  access: UpstreamServerSpec['access'];
  filter: ToolFilter;
  callTimeoutMs: number;
  ready: boolean;
  reason: string;
  message?: string;
  tools: readonly UpstreamTool[];
  /** Absent while no connection exists (invalid spec, missing Secret). */
  call?(tool: string, args: Record<string, unknown>, timeoutMs: number, signal?: AbortSignal): Promise<CallToolResult>;
}

/** Calls in flight at once per upstream and per user of it, from one replica (call-gate.ts). */
export const DEFAULT_CALL_LIMITS: CallGateLimits = { perServer: 64, perUser: 16 };

/** How long past its timeout a call that never settled keeps its place. */
const RELEASE_GRACE_MS = 1_000;

export class Upstreams implements UpstreamRegistry {
  private readonly entries = new Map<string, UpstreamEntry>();
  private readonly listeners = new Set<() => void>();
  private index: ToolSearch | undefined;
  private readonly gate: CallGate;

  /** `onCalls`: told a server's calls in flight and waiting after each change (for the gauges). */
  constructor(callLimits: CallGateLimits = DEFAULT_CALL_LIMITS, onCalls?: (server: string, calls: { active: number; waiting: number }) => void) {
    this.gate = new CallGate(callLimits, onCalls);
  }

  set(entry: UpstreamEntry): void {
    this.entries.set(entry.name, entry);
    this.changed();
  }

  delete(name: string): void {
    if (this.entries.delete(name)) this.changed();
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  servers(caller: Caller | undefined): UpstreamServerInfo[] {
    return [...this.entries.values()]
      .filter((e) => mayUse(e.access, caller))
      .sort((a, b) => a.name.localeCompare(b.name))
      .map((e) => ({
        name: e.name,
        ready: e.ready,
        reason: e.reason,
        ...(!e.ready && e.message !== undefined && { message: e.message }),
        toolCount: e.ready ? e.tools.length : 0,
        callTimeoutMs: e.callTimeoutMs,
      }));
  }

  catalog(caller: Caller | undefined, server: string): readonly UpstreamTool[] {
    const e = this.entry(caller, server);
    return e.ready ? e.tools : [];
  }

  search(caller: Caller | undefined, query: string, options: SearchOptions = {}): ToolSignature[] {
    const allowed = new Set(
      [...this.entries.values()]
        .filter((e) => e.ready && mayUse(e.access, caller) && (options.servers === undefined || options.servers.includes(e.name)))
        .map((e) => e.name),
    );
    if (allowed.size === 0) return [];
    this.index ??= new ToolSearch([...this.entries.values()].filter((e) => e.ready).flatMap((e) => e.tools));
    return this.index.search(query, allowed, options.limit ?? DEFAULT_SEARCH_LIMIT);
  }

  describe(caller: Caller | undefined, server: string, tool: string, level: DetailLevel): ToolDescription {
    return describeTool(this.tool(this.entry(caller, server), tool), level);
  }

  async call(caller: Caller | undefined, server: string, tool: string, args: Record<string, unknown>, options: CallOptions = {}): Promise<CallToolResult> {
    const e = this.entry(caller, server);
    this.tool(e, tool);
    if (!e.call) throw new UpstreamError('not_ready', `Upstream ${server} is not connected (${e.reason}${e.message ? `: ${e.message}` : ''}). Retry later.`);
    const timeoutMs = Math.max(1, Math.min(e.callTimeoutMs, options.timeoutMs ?? e.callTimeoutMs));
    if (options.signal?.aborted) throw new UpstreamError('aborted', `The call of ${server}.${tool} was cancelled.`);
    // Waiting for a place counts against the call's time: the caller's bound is for the whole call.
    // Most calls find a place at once and make no timer for the wait.
    const user = caller?.user ?? '';
    let release = this.gate.tryAcquire(server, user);
    let left = timeoutMs;
    if (!release) {
      const started = performance.now();
      release = await this.gate.acquire(server, user, waitSignal(timeoutMs, options.signal));
      left = Math.max(1, Math.floor(timeoutMs - (performance.now() - started)));
    }
    // The place is given back when the call's time is up even if the call never settles (a client
    // that ignored its timeout must not hold one of the user's places for good).
    const guard = setTimeout(release, left + RELEASE_GRACE_MS);
    guard.unref();
    try {
      return await e.call(tool, args, left, options.signal);
    } finally {
      clearTimeout(guard);
      release();
    }
  }

  /** The entry if `caller` may use it; otherwise the same error as for a server that does not exist. */
  private entry(caller: Caller | undefined, server: string): UpstreamEntry {
    const e = this.entries.get(server);
    if (!e || !mayUse(e.access, caller)) {
      const names = this.servers(caller).map((s) => s.name);
      throw new UpstreamError(
        'unknown_server',
        `There is no upstream server ${JSON.stringify(server)}. ${names.length ? `Servers you may use: ${names.join(', ')}.` : 'You may use no upstream servers.'}`,
      );
    }
    return e;
  }

  /** The tool of the (checked) entry: denied by the spec, or absent from the catalog, throws. */
  private tool(e: UpstreamEntry, tool: string): UpstreamTool {
    if (!e.filter.allows(tool))
      throw new UpstreamError('tool_denied', `Tool ${e.name}.${tool} is not allowed: the UpstreamServer's tools.allow/deny lists exclude it.`);
    if (!e.ready) throw new UpstreamError('not_ready', `Upstream ${e.name} is not connected (${e.reason}${e.message ? `: ${e.message}` : ''}). Retry later.`);
    const found = e.tools.find((t) => t.name === tool);
    if (!found) throw new UpstreamError('unknown_tool', `Upstream ${e.name} has no tool ${JSON.stringify(tool)}. Find tools with search_tools.`);
    return found;
  }

  private changed(): void {
    this.index = undefined;
    for (const l of this.listeners) {
      try {
        l();
      } catch {
        // a listener's failure never stops the registry
      }
    }
  }
}

function waitSignal(timeoutMs: number, signal: AbortSignal | undefined): AbortSignal {
  const limit = AbortSignal.timeout(timeoutMs);
  return signal ? AbortSignal.any([signal, limit]) : limit;
}
