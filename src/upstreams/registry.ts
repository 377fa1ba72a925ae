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
 * Least time a call that waited in line must have left to be sent. With less, the upstream can
 * hardly answer in time (a round trip to it, and the tool's own work), yet it would still do the
 * work — a write may happen that the caller is told timed out — and then get a cancellation; the
 * place goes to the next in line instead, and the caller hears that its wait used its time.
 */
export const MIN_CALL_TIME_LEFT_MS = 50;

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
 * Search indexes kept at once, one per set of servers callers may use (access rules make a few:
 * everyone, a team, admins). Their count is the administrator's doing, not a caller's: a caller
 * narrowing a search to some servers searches its whole set's index.
 */
export const MAX_INDEXES = 8;

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
  /**
   * Per set of servers a caller may use (its key: their names), an index over their ready
   * catalogs only, so that what a caller's search scores (a term's rarity, a field's length)
   * never depends on a server it may not use. Built by the first search after a catalog changed;
   * the least recently used beyond MAX_INDEXES are dropped.
   */
  private indexes = new Map<string, ToolSearch>();
  /** The indexes built last, while new ones wait for the budget (INDEX_CHARS_PER_SECOND). */
  private stale = new Map<string, ToolSearch>();
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
    const visible = [...this.entries.values()]
      .filter((e) => e.ready && mayUse(e.access, caller))
      .map((e) => e.name)
      .sort();
    const allowed = new Set(visible.filter((name) => options.servers === undefined || options.servers.includes(name)));
    if (allowed.size === 0) return [];
    // Building the index is everyone's work, bounded on its own (INDEX_CHARS_PER_SECOND): only the
    // query is the caller's.
    const key = visible.join('\u0000');
    const index = this.currentIndex(key, visible);
    const started = this.now();
    try {
      return this.query(index, key, allowed, query, options.limit ?? DEFAULT_SEARCH_LIMIT);
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

  /** `query` over `index`, or over the last one of its set (undefined: over budget for a new one). */
  private query(index: ToolSearch | undefined, key: string, allowed: ReadonlySet<string>, query: string, limit: number): ToolSignature[] {
    if (index) return index.search(query, allowed, limit);
    // The last index, over budget for a new one: without the tools (or servers) gone since.
    const held = new Set([...this.catalogs].filter(([name]) => allowed.has(name)).flatMap(([name, c]) => c.tools.map((t) => `${name}\u0000${t.name}`)));
    return this.stale
      .get(key)!
      .search(query, allowed, limit)
      .filter((h) => held.has(`${h.server}\u0000${h.name}`));
  }

  /**
   * The index of the servers `visible` (their ready catalogs), built if the budget allows;
   * undefined: use the stale one of this set. Over the budget with no stale one of this set (more
   * sets in use than MAX_INDEXES while catalogs churn), the search is refused until the budget allows.
   */
  private currentIndex(key: string, visible: readonly string[]): ToolSearch | undefined {
    const have = this.indexes.get(key);
    if (have) {
      // Most recently used last: the first is the one dropped.
      this.indexes.delete(key);
      this.indexes.set(key, have);
      return have;
    }
    const tools = visible.flatMap((name) => {
      const c = this.catalogs.get(name);
      return c?.ready ? c.tools : [];
    });
    const t = this.now();
    this.indexBudget = Math.min(INDEX_BURST_CHARS, this.indexBudget + (INDEX_CHARS_PER_SECOND * Math.max(0, t - this.budgetAt)) / 1000);
    this.budgetAt = t;
    const cost = tools.reduce((n, tool) => n + indexedChars(tool), 0);
    // A full budget builds whatever it costs: an index larger than the burst is built too, less often.
    if (cost > this.indexBudget && this.indexBudget < INDEX_BURST_CHARS) {
      if (this.stale.has(key)) return undefined;
      const seconds = Math.ceil(((Math.min(cost, INDEX_BURST_CHARS) - this.indexBudget) * 1000) / INDEX_CHARS_PER_SECOND / 1000);
      throw new UpstreamError('search_limit', `The gateway is rebuilding its tool search after catalog changes. Retry in ${Math.max(1, seconds)} s.`);
    }
    this.indexBudget -= cost;
    const index = new ToolSearch(tools);
    this.indexes.set(key, index);
    this.stale.delete(key);
    keepNewest(this.indexes);
    return index;
  }

  /** A catalog changed: the next searches build their indexes again (or keep the last ones, over budget). */
  private invalidate(): void {
    for (const [key, index] of this.indexes) {
      this.stale.delete(key);
      this.stale.set(key, index);
    }
    this.indexes = new Map();
    // As many stale ones kept as current ones would be: the most recently built.
    keepNewest(this.stale);
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
      left = Math.floor(timeoutMs - (performance.now() - started));
      if (left < MIN_CALL_TIME_LEFT_MS) {
        release();
        throw this.gate.timedOut(server);
      }
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

/** Drops the oldest entries (first inserted) of `m` beyond MAX_INDEXES. */
function keepNewest(m: Map<string, ToolSearch>): void {
  for (const old of m.keys()) {
    if (m.size <= MAX_INDEXES) break;
    m.delete(old);
  }
}
