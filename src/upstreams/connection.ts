// One warm MCP client connection to one upstream (Streamable HTTP, SDK v2 client, either protocol
// era). It lists the tool catalog on connect and on notifications/tools/list_changed (one listing
// at a time), pings on an interval so a vanished upstream is noticed even when nobody calls it,
// and reconnects with exponential backoff. What the upstream can make the SDK client hold or run
// is bounded in client-limits.ts. Header values come from Secrets: they live only in the
// transport's requestInit and are removed from every error text this class produces.
import type * as ClientSdk from '@modelcontextprotocol/client';
import type { CallToolResult, Client, StreamableHTTPClientTransport, Tool } from '@modelcontextprotocol/client';
// The SDK's errors are branded: its server package's classes match errors from the client package
// too (each package bundles its own copy), and the gateway loads the server package anyway.
import { SdkError, SdkErrorCode, SdkHttpError } from '@modelcontextprotocol/server';
import type { Logger } from 'pino';
import { MAX_UPSTREAM_ERROR_LENGTH, UpstreamReasons, type UpstreamReason } from '../api/v1alpha1/index.js';
import { AnswerStreams, EVENTS_PER_SECOND, EventPace, boundedFetch } from './bounded-fetch.js';
import { gentleReconnects, keepNothing, limitServerRequests, validateNothing } from './client-limits.js';
import { newHttpPool, type HttpPool } from './http-pool.js';
import { headerSchema } from './param-headers.js';
import { removeSecrets, withoutSecrets } from './result-secrets.js';
import { UpstreamError } from './types.js';

/** Most tools kept of one upstream; a catalog beyond it is cut (and the cut logged). */
export const MAX_TOOLS_PER_SERVER = 2000;
const MAX_DESCRIPTION_CHARS = 8192;
const MAX_BACKOFF_MS = 30_000;
/**
 * Most pages of one tools/list walk (each up to messageMaxBytes). The walk is ours (list()): the
 * SDK's held every page until it ended, up to 100, before the catalog was cut to
 * MAX_TOOLS_PER_SERVER (40 pages of 8 MiB: 1 GB of heap). An upstream that pages further is
 * listed with the tools of its first pages, and a warning says so.
 */
export const LIST_MAX_PAGES = 8;
/** Least time between the starts of two listings of one upstream (list_changed can come at any rate). */
const MIN_RELIST_MS = 1000;

export interface ConnectionTarget {
  url: string;
  /** Header name → value (values from Secrets). */
  headers: Readonly<Record<string, string>>;
}

export interface ConnectionState {
  ready: boolean;
  reason: UpstreamReason;
  /** What went wrong last (secrets removed, bounded); undefined once a connect succeeded. */
  error?: string;
  tools: readonly Tool[];
  refreshedAt?: Date;
}

export interface ConnectionOptions {
  /** Between health pings (and the longest reconnect backoff). */
  healthIntervalMs: number;
  /** Bound of connect, list and ping requests. */
  requestTimeoutMs: number;
  /** Largest message read from the upstream (bounded-fetch.ts). */
  messageMaxBytes: number;
  onState(state: ConnectionState): void;
  log: Logger;
}

/**
 * The client package, loaded with the first connection: it bundles its own copy of the SDK's
 * protocol code and JSON Schema validator (~3 MB of heap, ~4 MB of RSS), which a gateway without
 * upstreams never uses (docs/performance.md, Memory).
 */
let clientSdk: Promise<typeof ClientSdk> | undefined;
const loadClientSdk = (): Promise<typeof ClientSdk> => (clientSdk ??= import('@modelcontextprotocol/client'));

/** How long closing a client waits for the server to end its MCP session. */
const TERMINATE_TIMEOUT_MS = 2_000;

/**
 * Removes every secret value from `text` and bounds its length. A header value's credentials are
 * removed without their scheme too (result-secrets.ts).
 */
export function redact(text: string, secrets: Iterable<string>): string {
  const out = removeSecrets(text, secrets);
  return out.length <= MAX_UPSTREAM_ERROR_LENGTH ? out : `${out.slice(0, MAX_UPSTREAM_ERROR_LENGTH - 1)}…`;
}

/**
 * The credentials an upstream's URL may carry: its user name and password, and its query's values
 * (`?api_key=…`), as written and decoded. fetch refuses a URL with a user or password and quotes
 * it whole in its error ("…a URL that includes credentials: https://user:pass@…"), which reached
 * the log, the UpstreamServer's status and a call's error.
 */
export function urlSecrets(url: string): string[] {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return [];
  }
  const decode = (v: string): string => {
    try {
      return decodeURIComponent(v.replace(/\+/g, ' '));
    } catch {
      return v;
    }
  };
  const raw = [
    u.username,
    u.password,
    ...u.search
      .slice(1)
      .split('&')
      .map((p) => (p.includes('=') ? p.slice(p.indexOf('=') + 1) : '')),
  ];
  return [...new Set(raw.flatMap((v) => [v, decode(v)]))].filter((v) => v !== '');
}

/** A JSON-RPC method name as MCP's are (`ping`, `sampling/createMessage`): what a log line may name. */
const LOGGED_METHOD = /^[A-Za-z0-9_./-]{1,64}$/;

/** A reason and a readable sentence for a failure to connect, list or ping. */
export function classify(err: unknown): { reason: UpstreamReason; message: string } {
  if (err instanceof SdkHttpError && (err.status === 401 || err.status === 403)) {
    return {
      reason: UpstreamReasons.Unauthorized,
      message: `The upstream refused the gateway's credentials (HTTP ${err.status}); check the Secrets named in headers and bearerTokenSecretRef.`,
    };
  }
  const e = err as { message?: unknown; cause?: { code?: unknown; message?: unknown } };
  const cause = e?.cause ? `: ${String(e.cause.code ?? e.cause.message ?? '')}` : '';
  return { reason: UpstreamReasons.Unreachable, message: `${String(e?.message ?? err)}${cause}${httpDetail(err)}` };
}

/**
 * The status line of an HTTP error the SDK's message leaves out (its "Error POSTing to endpoint: …"
 * names only the body, which can be empty), so an operator can tell which hop answered. A body is
 * called empty only when it was read and empty: the SDK reads none for a failed GET or DELETE.
 */
function httpDetail(err: unknown): string {
  if (!(err instanceof SdkHttpError) || err.message.includes(`HTTP ${err.status}`)) return '';
  const empty = err.data.text === '' ? ', empty body' : '';
  return ` (HTTP ${err.status}${err.statusText ? ` ${err.statusText}` : ''}${empty})`;
}

/** Keeps a tool only if its shape is sane; bounds what an upstream can make the gateway hold. */
function sanitize(tools: readonly Tool[]): Tool[] {
  return tools
    .filter((t) => typeof t.name === 'string' && t.name.length > 0 && t.name.length <= 128)
    .slice(0, MAX_TOOLS_PER_SERVER)
    .map((t) => ({
      ...t,
      ...(typeof t.description === 'string' && { description: t.description.slice(0, MAX_DESCRIPTION_CHARS) }),
      inputSchema: typeof t.inputSchema === 'object' && t.inputSchema !== null ? t.inputSchema : { type: 'object' },
    }));
}

export class UpstreamConnection {
  private client: Client | undefined;
  /** The client's transport: it knows the MCP session to end. */
  private transport: StreamableHTTPClientTransport | undefined;
  /** The client's TCP connections (http-pool.ts): none is reused by the next client. */
  private pool: HttpPool | undefined;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  private backoffMs = 1000;
  private current: ConnectionState = { ready: false, reason: UpstreamReasons.Connecting, tools: [] };
  /** Bumped on every (re)connect, so callbacks of an old client change nothing. */
  private epoch = 0;
  /** The listing in flight (of the client of `epoch`); `again` if list_changed came meanwhile. */
  private listing: { epoch: number; again: boolean } | undefined;
  /** When the last listing began (Date.now()). */
  private listedAt = -Infinity;
  /** The pace of this upstream's events, across its reconnections (bounded-fetch.ts). */
  private readonly pace = new EventPace();
  /** When a paced stream was last logged (at most once a minute). */
  private pacedLoggedAt = -Infinity;

  constructor(
    readonly name: string,
    private readonly target: ConnectionTarget,
    private readonly opts: ConnectionOptions,
  ) {}

  get state(): ConnectionState {
    return this.current;
  }

  start(): void {
    void this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.epoch++;
    clearTimeout(this.timer);
    await this.closeClient();
  }

  /** Calls a tool on the connected upstream; see UpstreamRegistry.call for the error contract. */
  async call(tool: string, args: Record<string, unknown>, timeoutMs: number, signal?: AbortSignal): Promise<CallToolResult> {
    const client = this.client;
    if (!client || !this.current.ready) {
      throw new UpstreamError(
        'not_ready',
        `Upstream ${this.name} is not connected (${this.current.reason}${this.current.error ? `: ${this.current.error}` : ''}). Retry later.`,
      );
    }
    // The definition is ours (the cut catalog) and carries no outputSchema: the SDK validates a
    // result only against the definition it is given or holds (it holds none, client-limits.ts),
    // and a definition it is given also keeps it from re-listing the whole catalog on a 2026-era
    // header mismatch. Its inputSchema is what the SDK mirrors Mcp-Param-* headers from, walking
    // all of it on every call: it gets only the part that walk reads (param-headers.ts).
    const listed = this.current.tools.find((t) => t.name === tool);
    const toolDefinition: Tool = { name: tool, inputSchema: headerSchema(listed?.inputSchema) as Tool['inputSchema'] };
    try {
      const result = await client.callTool({ name: tool, arguments: args }, { timeout: timeoutMs, toolDefinition, ...(signal && { signal }) });
      // The credentials the gateway sent never reach the program: a tool's error that quotes them
      // ("invalid token …"), or a result that does anywhere (a tool echoing its request's headers
      // in a text, a link, a blob, _meta), has them removed or withheld (result-secrets.ts).
      return withoutSecrets(result, this.secrets(), this.name);
    } catch (err) {
      if (signal?.aborted) throw new UpstreamError('aborted', `The call of ${this.name}.${tool} was cancelled.`, { cause: err });
      if (err instanceof SdkError && err.code === SdkErrorCode.RequestTimeout) {
        throw new UpstreamError('timeout', `${this.name}.${tool} did not answer within ${timeoutMs} ms.`, { cause: err });
      }
      // A transport failure may mean the upstream went away: check now rather than at the next ping.
      if (!(err instanceof SdkError && err.code === SdkErrorCode.InvalidResult)) this.checkSoon();
      throw new UpstreamError('upstream_failed', `${this.name}.${tool} failed: ${this.redact(classify(err).message)}`, { cause: err });
    }
  }

  /** What the gateway sends the upstream that a text must never quote: header values and the URL's credentials. */
  private secrets(): string[] {
    // Once: every result is cleaned of them (the target never changes; a new one is a new connection).
    return (this.secretList ??= [...Object.values(this.target.headers), ...urlSecrets(this.target.url)]);
  }

  private secretList: string[] | undefined;

  private redact(text: string): string {
    return redact(text, this.secrets());
  }

  private setState(next: ConnectionState): void {
    this.current = next;
    this.opts.onState(next);
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    const epoch = ++this.epoch;
    await this.closeClient();
    let sdk: typeof ClientSdk;
    try {
      sdk = await loadClientSdk();
    } catch (err) {
      return this.fail(epoch, err);
    }
    // stop() (or another reconnect) may have come while the old client closed.
    if (this.stopped || epoch !== this.epoch) return;
    const client = new sdk.Client(
      { name: 'codemode-operator', version: '0.1.0' },
      {
        versionNegotiation: { mode: 'auto' },
        responseCacheStore: keepNothing,
        jsonSchemaValidator: validateNothing,
        // The SDK would start a listing per notification (28 were measured in flight at once) and
        // delay each by a debounce that a steady stream of notifications postpones for ever: ours
        // is single-flight instead (refresh()).
        listChanged: { tools: { autoRefresh: false, debounceMs: 0, onChanged: () => void this.refresh(epoch) } },
      },
    );
    client.onclose = () => {
      if (epoch === this.epoch && this.current.ready) this.fail(epoch, new Error('The connection to the upstream closed'));
    };
    this.client = client;
    let transport: StreamableHTTPClientTransport | undefined;
    const pool = newHttpPool();
    this.pool = pool;
    let tools: Tool[] = [];
    let step = 'connect';
    // A list_changed during connect runs one listing after the first one.
    const listing = { epoch, again: false };
    this.listing = listing;
    try {
      // A call's event stream ends once its answer was read (or the call was given up), whether
      // the upstream ends it or not.
      const answers = new AnswerStreams();
      const fetch = boundedFetch(
        this.opts.messageMaxBytes,
        (kind) =>
          this.opts.log.warn({ upstream: this.name, kind, maxBytes: this.opts.messageMaxBytes }, 'Dropped a message from an upstream larger than the bound'),
        pool.fetch,
        answers,
        {
          take: (events) => this.pace.take(events),
          onPaced: () => {
            const now = Date.now();
            if (now - this.pacedLoggedAt < 60_000) return;
            this.pacedLoggedAt = now;
            this.opts.log.warn(
              { upstream: this.name, eventsPerSecond: EVENTS_PER_SECOND },
              'An upstream sends events faster than the gateway reads them; reading its streams at that pace',
            );
          },
        },
      );
      transport = new sdk.StreamableHTTPClientTransport(new URL(this.target.url), {
        requestInit: { headers: { ...this.target.headers } },
        fetch,
        reconnectionScheduler: gentleReconnects(),
      });
      limitServerRequests(
        transport,
        // The method is the upstream's text, of any length: named only when it looks like one.
        (method) =>
          this.opts.log.warn(
            { upstream: this.name, method: LOGGED_METHOD.test(method) ? method : '(another)' },
            'Dropped requests from an upstream beyond the bound on them',
          ),
        Date.now,
        (id) => answers.answered(id),
      );
      this.transport = transport;
      await client.connect(transport, { timeout: this.opts.requestTimeoutMs });
      step = 'tools/list';
      tools = await this.list(client);
    } catch (err) {
      if (epoch === this.epoch) return this.fail(epoch, err, step);
    }
    if (epoch !== this.epoch) {
      // Superseded while connecting (stop() or a reconnect came meanwhile): this client is
      // nobody's any more, and its session is ended on the server too. A stop() that came while
      // the SDK still probed the protocol version found no transport on the client to abort, so
      // the connect went on to open a session; dropped without its DELETE, that session kept a
      // server process in a stdio bridge for the bridge's idle timeout.
      if (this.client === client) this.client = this.transport = this.pool = undefined;
      await this.end(client, transport, pool);
      return;
    }
    try {
      this.backoffMs = 1000;
      this.loaded(tools);
      this.schedule(epoch, this.opts.healthIntervalMs, () => this.health(epoch));
    } catch (err) {
      return this.fail(epoch, err);
    }
    if (this.listing === listing) this.listing = undefined;
    if (listing.again) void this.refresh(epoch);
  }

  /**
   * The catalog, page by page (the SDK's walk would keep every page, and a copy in its cache):
   * each page's tools are kept up to MAX_TOOLS_PER_SERVER, then the page goes; the walk ends there,
   * at the last page, at a page that repeats its cursor, or after LIST_MAX_PAGES.
   */
  private async list(client: Client): Promise<Tool[]> {
    this.listedAt = Date.now();
    const opts = { timeout: this.opts.requestTimeoutMs };
    const tools: Tool[] = [];
    let cursor: string | undefined;
    for (let page = 1; ; page++) {
      const r = cursor === undefined ? await client.request({ method: 'tools/list' }, opts) : await client.listTools({ cursor }, opts);
      tools.push(...sanitize(r.tools).slice(0, MAX_TOOLS_PER_SERVER - tools.length));
      const next = r.nextCursor;
      if (tools.length >= MAX_TOOLS_PER_SERVER || next === undefined || next === cursor) return tools;
      if (page >= LIST_MAX_PAGES) {
        this.opts.log.warn(
          { upstream: this.name, pages: page, tools: tools.length },
          'Listed the tools of the first pages of an upstream whose tools/list has more',
        );
        return tools;
      }
      cursor = next;
    }
  }

  /**
   * Lists the catalog again after a list_changed, one listing at a time: one that comes during a
   * listing marks it to run once more when done, no sooner than MIN_RELIST_MS after it began.
   */
  private async refresh(epoch: number): Promise<void> {
    if (epoch !== this.epoch || this.stopped) return;
    if (this.listing?.epoch === epoch) {
      this.listing.again = true;
      return;
    }
    const listing = { epoch, again: true };
    this.listing = listing;
    try {
      while (listing.again) {
        listing.again = false;
        const wait = this.listedAt + MIN_RELIST_MS - Date.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait).unref());
        const client = this.client;
        if (epoch !== this.epoch || this.stopped || !client) return;
        const tools = await this.list(client);
        if (epoch !== this.epoch) return;
        this.loaded(tools);
      }
    } catch (err) {
      this.fail(epoch, err);
    } finally {
      if (this.listing === listing) this.listing = undefined;
    }
  }

  private loaded(tools: readonly Tool[]): void {
    const kept = sanitize(tools);
    if (kept.length < tools.length) this.opts.log.warn({ upstream: this.name, listed: tools.length, kept: kept.length }, 'Cut the tool catalog of an upstream');
    this.setState({ ready: true, reason: UpstreamReasons.CatalogLoaded, tools: kept, refreshedAt: new Date() });
  }

  private async health(epoch: number): Promise<void> {
    try {
      await this.client?.ping({ timeout: this.opts.requestTimeoutMs });
      if (epoch !== this.epoch) return;
      this.schedule(epoch, this.opts.healthIntervalMs, () => this.health(epoch));
    } catch (err) {
      this.fail(epoch, err);
    }
  }

  /** A call failed at the transport: ping at once (a failed ping reconnects). */
  private checkSoon(): void {
    const epoch = this.epoch;
    if (this.current.ready) this.schedule(epoch, 0, () => this.health(epoch));
  }

  /** `during`: the step that failed, named in the error when it is not a steady-state one. */
  private fail(epoch: number, err: unknown, during?: string): void {
    if (epoch !== this.epoch || this.stopped) return;
    const { reason, message } = classify(err);
    const error = this.redact(during ? `${during}: ${message}` : message);
    this.opts.log.warn({ upstream: this.name, reason, err: error, retryInMs: this.backoffMs }, 'Upstream MCP server not reachable; reconnecting');
    this.setState({ ready: false, reason, error, tools: [], ...(this.current.refreshedAt && { refreshedAt: this.current.refreshedAt }) });
    const delay = this.backoffMs;
    this.backoffMs = Math.min(this.backoffMs * 2, Math.max(1000, Math.min(MAX_BACKOFF_MS, this.opts.healthIntervalMs)));
    this.epoch++;
    const next = this.epoch;
    void this.closeClient();
    this.schedule(next, delay, () => this.connect());
  }

  private schedule(epoch: number, ms: number, fn: () => Promise<void>): void {
    if (epoch !== this.epoch || this.stopped) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      if (epoch === this.epoch && !this.stopped) void fn();
    }, ms);
    this.timer.unref();
  }

  private async closeClient(): Promise<void> {
    const [c, t, p] = [this.client, this.transport, this.pool];
    this.client = this.transport = this.pool = undefined;
    // A pool exists only beside its client (connect() makes it after the client).
    if (c) await this.end(c, t, p);
  }

  /**
   * Closes a client and ends its MCP session on the server too (DELETE), not only drops it: a
   * stdio bridge keeps each session's server process until it idles out, so reconnects piled
   * processes up in its pod until its process limit was reached and new servers aborted (a
   * fresh-clone run). The DELETE is ours, after the close, from the session id the transport
   * learnt: the SDK closes a client itself when its handshake fails after the server opened the
   * session (e.g. the initialized notification), and a closed transport sends nothing. Bounded:
   * an unreachable server must not hold a reconnect up.
   */
  private async end(c: Client, t: StreamableHTTPClientTransport | undefined, pool: HttpPool | undefined): Promise<void> {
    c.onclose = undefined;
    const session = t?.sessionId;
    const version = t?.protocolVersion;
    await c.close().catch(() => undefined);
    pool?.close();
    if (session !== undefined) await this.endSession(session, version);
  }

  /**
   * On a pool of its own: the client's takes no new request once the client closed (and may be
   * closed already: a connect that stop() overtook ends its client a second time).
   */
  private async endSession(session: string, version: string | undefined): Promise<void> {
    const own = newHttpPool();
    const headers: Record<string, string> = { ...this.target.headers, 'mcp-session-id': session, ...(version && { 'mcp-protocol-version': version }) };
    // Never redirected: the headers may carry the upstream's credentials.
    await own
      .fetch(this.target.url, { method: 'DELETE', headers, redirect: 'manual', signal: AbortSignal.timeout(TERMINATE_TIMEOUT_MS) })
      .then((r) => r.body?.cancel())
      .catch(() => undefined);
    own.close();
  }
}
