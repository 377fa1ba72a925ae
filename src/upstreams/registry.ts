// The UpstreamRegistry the gateway and the broker use: per-caller views over the upstreams the
// watcher (watcher.ts) keeps current. No Kubernetes here: entries are set and removed by the
// watcher, so this file is tested with plain objects.
import { createHash } from 'node:crypto';
import type { CallToolResult } from '@modelcontextprotocol/client';
import type { UpstreamServerSpec } from '../api/v1alpha1/index.js';
import { CallGate, type CallGateLimits } from './call-gate.js';
import { mayUse, type ToolFilter } from './policy.js';
import { DEFAULT_SEARCH_LIMIT, indexedChars, ToolSearch } from './search.js';
import { describeTool } from './signature.js';
import { DebtBucket } from '../util/debt-bucket.js';
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

/**
 * One upstream as the watcher last saw it. `tools` are already filtered by allow and deny, and
 * never changed in place (set() a new array instead).
 */
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

/**
 * Tool text (indexedChars) the search index may be built from per second on average, after a first
 * INDEX_BURST_CHARS. Building takes ~0.5 µs a character on the gateway's thread (2,000 tools of
 * 1 KiB: ~1 s, every server's tools are indexed together), and an upstream may change its catalog
 * every second (list_changed): each search after a change rebuilt it, so one upstream's churn held
 * the thread most of the time. Past the budget a search uses the index built last, without the
 * tools that are gone since, until the budget allows a new one (~10% of the thread at most).
 */
export const INDEX_CHARS_PER_SECOND = 200_000;
export const INDEX_BURST_CHARS = 4_000_000;

/**
 * Time on the gateway's thread one user's searches may take, in ms: USER_SEARCH_BURST_MS, then
 * USER_SEARCH_MS_PER_SECOND of each second — whether they come from search_tools or from sandbox
 * code, and from however many runs and sessions. A search takes 2–10 ms over a few thousand tools
 * on a slow machine, and one run's own budget (src/codemode/broker.ts) does not bound a user's
 * many runs, nor search_tools at the request rate. A user over it is refused until it is repaid.
 */
export const USER_SEARCH_BURST_MS = 1_000;
export const USER_SEARCH_MS_PER_SECOND = 100;

/** What a caller allowed to use a server may read of its catalog, and that catalog's version. */
interface Catalog {
  ready: boolean;
  tools: readonly UpstreamTool[];
  /** Hash of `tools`, made when a set() brings a different array. */
  hash?: string | undefined;
  version: number;
}

export class Upstreams implements UpstreamRegistry {
  private readonly entries = new Map<string, UpstreamEntry>();
  private readonly listeners = new Set<() => void>();
  /** Per server: kept while set() brings an equal catalog, so the version and the index stay. */
  private readonly catalogs = new Map<string, Catalog>();
  private nextVersion = 1;
  /** Over the ready catalogs; built by the first search after one of them changed. */
  private index: ToolSearch | undefined;
  /** The index built last, while a new one waits for the budget (INDEX_CHARS_PER_SECOND). */
  private stale: ToolSearch | undefined;
  private indexBudget = INDEX_BURST_CHARS;
  private budgetAt: number;
  private readonly gate: CallGate;
  /** Per user: the thread time their searches took (USER_SEARCH_MS_PER_SECOND); full ones are forgotten. */
  private readonly searchBudgets = new Map<string, DebtBucket>();

  /**
   * `onCalls`: told a server's calls in flight and waiting after each change (for the gauges);
   * `now`: the clock the index budget is measured with.
   */
  constructor(
    callLimits: CallGateLimits = DEFAULT_CALL_LIMITS,
    onCalls?: (server: string, calls: { active: number; waiting: number }) => void,
    private readonly now: () => number = Date.now,
  ) {
    this.gate = new CallGate(callLimits, onCalls);
    this.budgetAt = now();
  }

  /**
   * Publishes an upstream. The watcher sets every server on each reconcile (a status write, a
   * refresh of any upstream): a catalog equal to the one held (same readiness, same tools by
   * content) keeps its version, its array and the search index.
   */
  set(entry: UpstreamEntry): void {
    const held = this.catalogs.get(entry.name);
    const next: Catalog = { ready: entry.ready, tools: entry.tools, version: this.nextVersion };
    if (held && sameCatalog(held, next)) {
      this.entries.set(entry.name, held.tools === entry.tools ? entry : { ...entry, tools: held.tools });
    } else {
      this.nextVersion++;
      this.entries.set(entry.name, entry);
      this.catalogs.set(entry.name, next);
      this.invalidate();
    }
    this.changed();
  }

  delete(name: string): void {
    if (!this.entries.delete(name)) return;
    this.catalogs.delete(name);
    this.invalidate();
    this.changed();
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

  /**
   * Changes whenever catalog(…, server) would answer differently. The catalog is the same for
   * every caller allowed to use the server (access decides only whether they may), so equal
   * versions mean equal catalogs whoever asks. Throws UpstreamError like catalog().
   */
  catalogVersion(caller: Caller | undefined, server: string): string {
    this.entry(caller, server);
    return String(this.catalogs.get(server)?.version);
  }

  search(caller: Caller | undefined, query: string, options: SearchOptions = {}): ToolSignature[] {
    const budget = this.searchBudget(caller?.user ?? '');
    const owed = budget.charge(0);
    if (owed > 0)
      throw new UpstreamError(
        'search_limit',
        `Your searches took more than ${USER_SEARCH_MS_PER_SECOND} ms of the gateway's time a second (after ${USER_SEARCH_BURST_MS} ms). Retry in ${Math.ceil(owed / 1000)} s; search less often, or ask for more results at once.`,
      );
    const allowed = new Set(
      [...this.entries.values()]
        .filter((e) => e.ready && mayUse(e.access, caller) && (options.servers === undefined || options.servers.includes(e.name)))
        .map((e) => e.name),
    );
    if (allowed.size === 0) return [];
    // Building the index is everyone's work, bounded on its own (INDEX_CHARS_PER_SECOND): only the
    // query is the caller's.
    const index = this.currentIndex();
    const started = this.now();
    try {
      return this.query(index, allowed, query, options.limit ?? DEFAULT_SEARCH_LIMIT);
    } finally {
      budget.charge(this.now() - started);
    }
  }

  /** The user's search budget, made on first use; making one forgets the full ones (they carry nothing). */
  private searchBudget(user: string): DebtBucket {
    let b = this.searchBudgets.get(user);
    if (!b) {
      for (const [name, other] of this.searchBudgets) if (other.full) this.searchBudgets.delete(name);
      b = new DebtBucket(USER_SEARCH_BURST_MS, USER_SEARCH_MS_PER_SECOND, this.now);
      this.searchBudgets.set(user, b);
    }
    return b;
  }

  /** `query` over `index`, or over the last one (undefined: over budget for a new one). */
  private query(index: ToolSearch | undefined, allowed: ReadonlySet<string>, query: string, limit: number): ToolSignature[] {
    if (index) return index.search(query, allowed, limit);
    // The last index, over budget for a new one: without the tools (or servers) gone since.
    const held = new Set([...this.catalogs].filter(([name]) => allowed.has(name)).flatMap(([name, c]) => c.tools.map((t) => `${name}\u0000${t.name}`)));
    return this.stale!.search(query, allowed, limit).filter((h) => held.has(`${h.server}\u0000${h.name}`));
  }

  /** The index of the ready catalogs, built if the budget allows (or none was ever built); undefined: use `stale`. */
  private currentIndex(): ToolSearch | undefined {
    if (this.index) return this.index;
    const tools = [...this.catalogs.values()].filter((c) => c.ready).flatMap((c) => c.tools);
    const t = this.now();
    this.indexBudget = Math.min(INDEX_BURST_CHARS, this.indexBudget + (INDEX_CHARS_PER_SECOND * Math.max(0, t - this.budgetAt)) / 1000);
    this.budgetAt = t;
    const cost = tools.reduce((n, tool) => n + indexedChars(tool), 0);
    // A full budget builds whatever it costs: an index larger than the burst is built too, less often.
    if (this.stale && cost > this.indexBudget && this.indexBudget < INDEX_BURST_CHARS) return undefined;
    this.indexBudget -= cost;
    this.index = new ToolSearch(tools);
    this.stale = undefined;
    return this.index;
  }

  /** A catalog changed: the next search builds the index again (or keeps the last one, over budget). */
  private invalidate(): void {
    this.stale = this.index ?? this.stale;
    this.index = undefined;
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
    for (const l of this.listeners) {
      try {
        l();
      } catch {
        // a listener's failure never stops the registry
      }
    }
  }
}

/** Equal readiness and tools (by content: hashed once per array that set() brings). */
function sameCatalog(held: Catalog, next: Catalog): boolean {
  if (held.ready !== next.ready) return false;
  if (held.tools === next.tools) return true;
  if (held.tools.length !== next.tools.length) return false;
  held.hash ??= catalogHash(held.tools);
  next.hash = catalogHash(next.tools);
  return next.hash !== undefined && next.hash === held.hash;
}

/** A hash of the tools' JSON (undefined if they have none: then no catalog equals them). */
function catalogHash(tools: readonly UpstreamTool[]): string | undefined {
  try {
    return createHash('sha256').update(JSON.stringify(tools)).digest('base64');
  } catch {
    return undefined;
  }
}

function waitSignal(timeoutMs: number, signal: AbortSignal | undefined): AbortSignal {
  const limit = AbortSignal.timeout(timeoutMs);
  return signal ? AbortSignal.any([signal, limit]) : limit;
}
