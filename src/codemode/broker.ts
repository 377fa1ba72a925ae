// The broker: every nested tool call a sandbox program makes passes through here (issue 11,
// "Policy, limits, audit"). A ToolBroker lives as long as the process; each execution gets a
// RunCalls that enforces that run's policy (which servers), limits (calls, per-call timeout,
// bytes returned, the run's own deadline) and counts what happened. handle() never rejects:
// every failure is an answer the program raises as a ToolError.
import type { Owner } from '../api/v1alpha1/index.js';
import { checkArgs } from './args.js';
import { callFailure, errorMessage, type CallFailure } from './call-failures.js';
import { DescribedCatalogs, prepare, type Prepared } from './described.js';
import { describeTool, searchTools } from './discovery.js';
import { failure, type CallAnswer, type CallFrame, type Detail } from './frames.js';
import type { ServerInfo, ToolInfo, UpstreamCaller, UpstreamResult } from './types.js';
import { unwrapResult } from './unwrap.js';

export interface BrokerLimits {
  /** Tool calls one run may make. */
  maxCalls: number;
  /** One tool call's limit (the run's remaining time shortens it). */
  callTimeoutMs: number;
  /** A result larger than this (JSON bytes) is cut structurally. */
  resultMaxBytes: number;
  /** Bytes of results (and discovery answers) one run may receive. */
  bytesPerRun: number;
}

/** Outcomes of a tool call (metric label values: a closed set). */
export const CALL_OUTCOMES = ['ok', 'tool_error', 'denied', 'limit', 'timeout', 'invalid', 'failed'] as const;
export type CallOutcome = (typeof CALL_OUTCOMES)[number];

export interface CodemodeMetrics {
  /** `server` is an admin-defined upstream name, or "" when the program named none it may use. */
  upstreamCall(server: string, outcome: CallOutcome, seconds: number): void;
}

/** What a run's nested calls amounted to (execute_code's structuredContent.tool_calls). */
export interface CallSummary {
  calls: number;
  errors: number;
  /** Wall time during which at least one upstream call was pending (part of the run's duration). */
  upstreamWaitMs: number;
  servers: Record<string, { calls: number; errors: number }>;
}

/** Denied calls of one run that get an Event: the rest are counted in the result and the metrics. */
export const MAX_DENIED_EVENTS_PER_RUN = 3;

export interface RunCallOptions {
  /** Which upstreams the run may call (default: all the owner may). */
  servers?: readonly string[];
  owner?: Owner;
  /** Epoch ms when the execution's own timeout ends: no tool call may outlast it. */
  deadline?: number;
  /** Told of a denied call (at most MAX_DENIED_EVENTS_PER_RUN per run), for an Event. */
  onDenied?: (message: string) => void;
  /** The clock (ms) the search rate and the searches' time are measured with (tests). */
  now?: () => number;
}

/** Discovery requests (servers, search, describe) one run may make: they cost no upstream call. */
export const MAX_DISCOVERY_PER_RUN = 1000;
/**
 * Searches one run may make at once, and then per second of its life. A search runs the query over
 * every tool the run may use and cuts its answer on the gateway's thread: ~4-7 ms against 2,000
 * tools, so 1,000 back to back held that thread for 5-7 s, in blocks every other user's requests
 * waited between. A program rarely searches more than a few dozen times; past the burst, a run's
 * searches take at most SEARCHES_PER_SECOND x a search's time of each second.
 */
export const SEARCH_BURST = 100;
export const SEARCHES_PER_SECOND = 20;
/**
 * Time on the gateway's thread one run's searches may take, in ms: SEARCH_BURST_MS, then
 * SEARCH_MS_PER_SECOND of each second of its life. The counts above assume ~5 ms a search, but a
 * search costs with the tools that match: against 10,000 tools (five servers of 2,000) one took
 * 30-50 ms, so 20 a second held most of the thread. A search's own time is counted too.
 */
export const SEARCH_BURST_MS = 500;
export const SEARCH_MS_PER_SECOND = 100;

export class ToolBroker {
  /** describe(server) answers shared by this broker's runs (described.ts). */
  private readonly described = new DescribedCatalogs();

  constructor(
    private readonly up: UpstreamCaller,
    readonly limits: BrokerLimits,
    private readonly metrics?: CodemodeMetrics,
  ) {}

  serverNames(owner?: Owner): string[] {
    return this.up.servers(owner).map((s) => s.name);
  }

  /**
   * The servers in `requested` that `owner` may not use (or that do not exist). One they may use
   * that is not connected now is not among them: its calls are answered "retry later".
   */
  unknownServers(requested: readonly string[], owner?: Owner): string[] {
    const known = new Set(this.serverNames(owner));
    return requested.filter((s) => !known.has(s));
  }

  /** One execution's broker. `servers`: which upstreams it may call (default: all the owner may). */
  forRun(options: RunCallOptions): RunCalls {
    return new RunCalls(this.up, this.limits, options, this.metrics, this.described);
  }
}

export class RunCalls {
  /**
   * Aborts the calls in flight when the run ends. Made by the first upstream call: most runs make
   * none, and aborting costs an Error with its stack (~15 µs of every session call).
   */
  private abort: AbortController | undefined;
  private closed = false;
  private calls = 0;
  private discovery = 0;
  private searches = 0;
  /** Time the run's searches took (the clock's units: ms). */
  private searchMs = 0;
  private readonly startedAt: number;
  private bytes = 0;
  private active = 0;
  private activeSince = 0;
  private deniedEvents = 0;
  private readonly totals: CallSummary = { calls: 0, errors: 0, upstreamWaitMs: 0, servers: {} };

  constructor(
    private readonly up: UpstreamCaller,
    private readonly limits: BrokerLimits,
    private readonly opts: RunCallOptions,
    private readonly metrics?: CodemodeMetrics,
    private readonly described = new DescribedCatalogs(),
  ) {
    this.startedAt = this.clock();
  }

  /** Now, in ms: the run's own clock (tests), or the process's. */
  private clock(): number {
    return this.opts.now ? this.opts.now() : performance.now();
  }

  /** The servers this run may call (connected now or not): the owner's, narrowed to `servers` when given. */
  allowed(): string[] {
    return this.usable().map((s) => s.name);
  }

  private usable(): ServerInfo[] {
    const mine = this.up.servers(this.opts.owner);
    return this.opts.servers ? mine.filter((s) => this.opts.servers?.includes(s.name)) : mine;
  }

  async handle(frame: CallFrame): Promise<CallAnswer> {
    try {
      if (frame.op === 'call') return await this.call(frame.server, frame.tool, frame.args);
      if (++this.discovery > MAX_DISCOVERY_PER_RUN) return failure('limit', `this run made more than ${MAX_DISCOVERY_PER_RUN} discovery requests`);
      // No answer fits once the bytes are spent: refuse before reading a catalog.
      if (this.bytes >= this.limits.bytesPerRun) return this.spent();
      if (frame.op === 'servers') return this.answer(this.servers());
      if (frame.op === 'search') {
        const started = this.clock();
        const elapsed = Math.max(0, started - this.startedAt);
        if (this.searches >= SEARCH_BURST + Math.floor((SEARCHES_PER_SECOND * elapsed) / 1000))
          return failure(
            'limit',
            `this run searched faster than ${SEARCHES_PER_SECOND} times a second (after ${SEARCH_BURST}); search less often, or ask for more results at once`,
          );
        if (this.searchMs > SEARCH_BURST_MS + (SEARCH_MS_PER_SECOND * elapsed) / 1000)
          return failure(
            'limit',
            `this run's searches took ${Math.round(this.searchMs)} ms of the gateway's time, more than ${SEARCH_MS_PER_SECOND} ms a second (after ${SEARCH_BURST_MS}); search less often, or ask for more results at once`,
          );
        this.searches++;
        try {
          const hits = searchTools(this.up, this.allowed(), frame.query, frame.limit, this.opts.owner);
          return this.give(
            joined(
              hits.map((h) => this.describeOne(h.server, h.tool, frame.detail)),
              this.limits.resultMaxBytes,
            ),
          );
        } finally {
          this.searchMs += Math.max(0, this.clock() - started);
        }
      }
      const refused = this.refuse(frame.server);
      if (refused) return refused;
      if (frame.tool === undefined) return this.describeServer(frame.server, frame.detail);
      const version = this.up.catalogVersion?.(frame.server, this.opts.owner);
      const kept = version === undefined ? undefined : this.described.get(frame.server, version, frame.detail, frame.tool);
      if (kept) return this.give(kept);
      const t = findTool(this.up.tools(frame.server, this.opts.owner), frame.tool);
      if (!t) return failure('denied', noTool(frame.server, frame.tool));
      return this.give(this.describeOne(frame.server, t, frame.detail, version));
    } catch (err) {
      // The user's searches took their share of the gateway's thread (all their runs' together).
      if ((err as { code?: unknown } | undefined)?.code === 'search_limit') return failure('limit', errorMessage(err));
      return failure('unavailable', `the gateway could not answer: ${errorMessage(err)}`);
    }
  }

  summary(): CallSummary {
    // No call made or in flight (most runs): nothing to copy.
    if (this.totals.calls === 0 && this.active === 0) return { calls: 0, errors: 0, upstreamWaitMs: 0, servers: {} };
    const s = structuredClone(this.totals);
    if (this.active > 0) s.upstreamWaitMs += performance.now() - this.activeSince;
    s.upstreamWaitMs = Math.round(s.upstreamWaitMs);
    return s;
  }

  /** The run ended: calls still waiting on upstreams are abandoned. */
  close(): void {
    this.closed = true;
    this.abort?.abort(new Error('the run ended'));
  }

  /** The signal of the run's end (already aborted for a call that comes after it). */
  private runEnded(): AbortSignal {
    if (!this.abort) {
      this.abort = new AbortController();
      if (this.closed) this.abort.abort(new Error('the run ended'));
    }
    return this.abort.signal;
  }

  /** The servers the program can call now: one not connected now comes back when it is. */
  private servers(): unknown {
    return this.usable()
      .filter((s) => s.notReady === undefined)
      .map((s) => ({ name: s.name, tools: s.toolCount, ...(s.description && { description: s.description }) }));
  }

  /**
   * Every tool of a server the run may use (checked), measured and cut once per catalog version
   * and detail level: asked again, the answer costs a lookup, refused or not.
   */
  private describeServer(server: string, detail: Detail): CallAnswer {
    const version = this.up.catalogVersion?.(server, this.opts.owner);
    const kept = version === undefined ? undefined : this.described.get(server, version, detail);
    if (kept) return this.give(kept);
    const tools = this.up.tools(server, this.opts.owner) ?? [];
    const prepared = prepare(
      tools.map((t) => describeTool(server, t, detail)),
      this.limits.resultMaxBytes,
    );
    if (version !== undefined) this.described.set(server, version, detail, prepared);
    return this.give(prepared);
  }

  /**
   * One tool described, measured and cut once per catalog version and detail level: a tool's
   * schema may be megabytes (~1 s to sign, measure and cut 500,000 parameters), and a run may ask
   * for it, or find it in searches, hundreds of times.
   */
  private describeOne(server: string, t: ToolInfo, detail: Detail, version = this.up.catalogVersion?.(server, this.opts.owner)): Prepared {
    const kept = version === undefined ? undefined : this.described.get(server, version, detail, t.name);
    if (kept) return kept;
    const prepared = prepare(describeTool(server, t, detail), this.limits.resultMaxBytes);
    if (version !== undefined) this.described.set(server, version, detail, prepared, t.name);
    return prepared;
  }

  /**
   * `denied` for a server the run may not use; `unavailable` for one it may that is not connected
   * now (reconnecting, say): not the program's fault, so no Event and not counted as denied.
   */
  private refuse(server: string): CallAnswer | undefined {
    const usable = this.usable();
    const s = usable.find((u) => u.name === server);
    if (s?.notReady !== undefined) return failure('unavailable', `server "${server}" is not connected now (${s.notReady}); retry later`);
    if (s) return undefined;
    const names = usable.map((u) => u.name).join(', ');
    return failure('denied', `server "${server}" is not available to this program (it may call: ${names || 'none'}); call servers() to list them`);
  }

  private async call(server: string, tool: string, args: Record<string, unknown>): Promise<CallAnswer> {
    const started = performance.now();
    const refused = this.refuse(server);
    const denied = refused?.ok === false && refused.error.kind === 'denied';
    // Label only admin-defined names: a name the program made up is not one.
    const label = denied ? '' : server;
    const done = (outcome: CallOutcome, answer: CallAnswer): CallAnswer => this.count(label, outcome, started, answer);
    if (refused && denied) return done('denied', refused);
    const overLimit = (): CallAnswer => failure('limit', `this run already made ${this.calls} tool calls; the limit is ${this.limits.maxCalls} per run`);
    if (refused) {
      // Not connected now: counted as a call, so a program that retries at once in a loop meets
      // the run's call limit rather than spinning until its timeout.
      if (this.calls >= this.limits.maxCalls) return done('limit', overLimit());
      this.calls++;
      return done('failed', refused);
    }
    const t = findTool(this.up.tools(server, this.opts.owner), tool);
    if (!t) return done('denied', failure('denied', noTool(server, tool)));
    if (this.calls >= this.limits.maxCalls) return done('limit', overLimit());
    const problems = checkArgs(t.inputSchema, args);
    if (problems.length > 0) return done('invalid', failure('invalid', `${server}.${tool}: ${problems.join('; ')}`));
    this.calls++;
    const left = this.opts.deadline === undefined ? Infinity : this.opts.deadline - Date.now();
    const timeoutMs = Math.max(0, Math.min(this.limits.callTimeoutMs, left));
    if (timeoutMs <= 0) return done('timeout', failure('timeout', `${server}.${tool}: the run has no time left for a tool call`));
    const r = await this.upstream(server, tool, args, timeoutMs);
    if (r === 'timeout') return done('timeout', failure('timeout', `${server}.${tool} did not answer within ${timeoutMs} ms`));
    if ('failed' in r) return done(r.failed.outcome, failure(r.failed.kind, r.failed.message));
    const u = unwrapResult(r.result);
    if (!u.ok) return done('tool_error', failure('tool', u.message));
    return done('ok', this.answer(u.value));
  }

  /** The upstream call, bounded by its timeout even if the caller ignores the signal. */
  private async upstream(
    server: string,
    tool: string,
    args: Record<string, unknown>,
    timeoutMs: number,
  ): Promise<'timeout' | { result: UpstreamResult } | { failed: CallFailure }> {
    const ended = this.runEnded();
    if (ended.aborted) return { failed: callFailure(new Error('the run ended'), server, tool) };
    const signal = AbortSignal.any([ended, AbortSignal.timeout(timeoutMs)]);
    let timer: NodeJS.Timeout | undefined;
    if (this.active++ === 0) this.activeSince = performance.now();
    try {
      const late = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)));
      const call = this.up.call(server, tool, args, { signal, timeoutMs, ...(this.opts.owner && { owner: this.opts.owner }) }).then(
        (result) => ({ result }),
        // The broker's own time ran out: a timeout whatever the caller made of the abort, with the
        // caller's explanation when it gives one (its error's code is "timeout"). Otherwise the
        // caller's error says what it was (a timeout of the server's own, a wait in line, a server
        // not connected now): callFailure maps its code to the program's kind.
        (err: unknown) => ({
          failed:
            signal.aborted && !ended.aborted
              ? {
                  kind: 'timeout' as const,
                  outcome: 'timeout' as const,
                  message: timeoutText(err) ?? `${server}.${tool} did not answer within ${timeoutMs} ms`,
                }
              : callFailure(err, server, tool),
        }),
      );
      return await Promise.race([call, late]);
    } finally {
      clearTimeout(timer);
      if (--this.active === 0) this.totals.upstreamWaitMs += performance.now() - this.activeSince;
    }
  }

  /** A value for the program: cut to the result size, counted against the run's bytes. */
  private answer(value: unknown): CallAnswer {
    return this.give(prepare(value, this.limits.resultMaxBytes));
  }

  /** A prepared value for the program, if its bytes fit what is left of the run's. */
  private give(p: Prepared): CallAnswer {
    if (this.bytes + p.bytes > this.limits.bytesPerRun) {
      return failure(
        'limit',
        `this run received ${this.bytes} bytes from tools; the next ${p.bytes} would pass the limit of ${this.limits.bytesPerRun} per run (ask for less: filters, pages)`,
      );
    }
    this.bytes += p.bytes;
    return { ok: true, value: p.value, ...(p.cut !== undefined && { cut: p.cut }) };
  }

  private spent(): CallAnswer {
    return failure('limit', `this run already received ${this.bytes} bytes from tools, its limit of ${this.limits.bytesPerRun} per run`);
  }

  private count(server: string, outcome: CallOutcome, started: number, answer: CallAnswer): CallAnswer {
    // A result refused for the byte limit is a limit, whatever the upstream said.
    const final: CallOutcome = outcome === 'ok' && !answer.ok ? 'limit' : outcome;
    const failed = final !== 'ok';
    if (final === 'denied' && !answer.ok && this.deniedEvents++ < MAX_DENIED_EVENTS_PER_RUN) this.opts.onDenied?.(answer.error.message);
    this.totals.calls++;
    if (failed) this.totals.errors++;
    const key = server === '' ? '(denied)' : server;
    // Own keys only: a server may be named "constructor" (a Kubernetes name), whose ??= found
    // Object and counted the server's calls on it.
    const s = Object.hasOwn(this.totals.servers, key) ? this.totals.servers[key]! : (this.totals.servers[key] = { calls: 0, errors: 0 });
    s.calls++;
    if (failed) s.errors++;
    this.metrics?.upstreamCall(server, final, (performance.now() - started) / 1000);
    return answer;
  }
}

/**
 * Prepared values as one array, cut to `maxBytes`: measured again only when they do not fit
 * together as they are (then each is at most `maxBytes` already), so a search costs its hits'
 * kept answers, not their tools' schemas.
 */
function joined(parts: Prepared[], maxBytes: number): Prepared {
  const value = parts.map((p) => p.value);
  const bytes = 2 + Math.max(0, parts.length - 1) + parts.reduce((n, p) => n + p.bytes, 0);
  const cut = parts.find((p) => p.cut !== undefined)?.cut;
  if (bytes <= maxBytes) return { value, bytes, ...(cut !== undefined && { cut }) };
  const all = prepare(value, maxBytes);
  return all.cut !== undefined || cut === undefined ? all : { ...all, cut };
}

/** Each catalog array's tools by name (a catalog is never changed in place: UpstreamCaller). */
const byName = new WeakMap<readonly ToolInfo[], Map<string, ToolInfo>>();

/**
 * The tool of `tools` named `name`, looked up, not searched: every call a program makes (refused
 * ones too, ~1,000 a second a stream) looks its tool up in a catalog of up to 2,000.
 */
function findTool(tools: readonly ToolInfo[] | undefined, name: string): ToolInfo | undefined {
  if (!tools) return undefined;
  let m = byName.get(tools);
  if (!m) {
    m = new Map();
    // The first of a name, as find() gave.
    for (const t of tools) if (!m.has(t.name)) m.set(t.name, t);
    byName.set(tools, m);
  }
  return m.get(name);
}

function noTool(server: string, tool: string): string {
  return `server "${server}" has no tool "${tool}" that this program may call; use search() or describe("${server}") to find one`;
}

function timeoutText(err: unknown): string | undefined {
  return (err as { code?: unknown } | undefined)?.code === 'timeout' ? errorMessage(err) : undefined;
}
