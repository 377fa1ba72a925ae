// HTTP wiring of the gateway: probes and the MCP endpoint. Transport only; tools live in tools/.
//
// /mcp is served by the SDK's createMcpHandler: it answers 2026-07-28 (per-request envelope)
// traffic and, through its stateless legacy fallback, 2025-era clients (initialize handshake,
// no session id). Both eras get a fresh McpServer per HTTP request, so no session lives in one
// replica's memory and any replica can answer any request.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Hono, type Context } from 'hono';
import { createMcpHandler } from '@modelcontextprotocol/server';
import { METADATA_PATH, authMiddleware, carryIdentity, identityOf, metadataHandler } from '../auth/middleware.js';
import { checkBatch, type BodyRefusal } from './batch-limit.js';
import { ConnectionOwners } from './connection-owners.js';
import { BodyBudget, bodyBudgetRefused, keepHold } from './body-budget.js';
import { watchBodyProgress } from './body-progress.js';
import { ListenLimit, listenId, listenRefused } from './listen-limit.js';
import { markListen } from './drain.js';
import { oversizedId, oversizedIdRefused } from './message-ids.js';
import { RequestRate } from './request-rate.js';
import { StallGuard } from './stall-guard.js';
import { errorHead } from '../log/error-head.js';
import { hostValidation } from './host-validation.js';
import { mcpServerFactory } from './server.js';
import type { GatewayDeps } from './types.js';

/**
 * The largest /mcp request body: a write_file of the largest file CODEMODE_MAX_FILE_BYTES allows
 * (8 MiB) in base64 (10.7 MiB) with its envelope, and the largest execute_code (256 KiB of code and
 * 256 KiB of stdin) even when JSON escaping of control characters inflates it six times.
 */
export const MAX_MCP_BODY_BYTES = 12 * 1024 * 1024;

/**
 * Creates the gateway app with /healthz, /readyz and /mcp. main.ts mounts further routes
 * (/metrics) on the returned app.
 */
export function createApp(deps: GatewayDeps): Hono {
  const logger = deps.logger.child({ component: 'gateway' });
  const mcp = createMcpHandler(mcpServerFactory(deps), {
    // The SDK's 4 MiB default would refuse valid requests.
    maxRequestBodySize: MAX_MCP_BODY_BYTES,
    // Called for requests the SDK refused (bad content type, unknown protocol version, ...):
    // client mistakes, so debug level; the client already got the error. Its message can quote the
    // request (a header's value, the body's tool name, of any size): only its head is logged.
    onerror: (err) => logger.debug({ err: errorHead(err) }, 'Rejected MCP request'),
  });

  const app = new Hono();
  const owners = deps.connectionsPerUser ? new ConnectionOwners(deps.connectionsPerUser) : undefined;
  app.use('*', async (c, next) => {
    await next();
    if (!keepsConnection(c, deps, owners)) c.header('Connection', 'close');
  });
  app.get('/healthz', (c) => c.text('ok'));
  app.get('/readyz', (c) => {
    if (!deps.isReady()) return c.text('not ready: the operator is starting (caches not synced yet) or shutting down', 503);
    const sandbox = deps.sandboxGate?.notReady();
    return sandbox === undefined ? c.text('ok') : c.text(`not ready: ${sandbox}`, 503);
  });
  const checkHost = hostValidation(deps.options);
  app.use('/mcp', checkHost);
  if (deps.auth && deps.auth.authenticator.mode !== 'none') {
    // OAuth protected-resource metadata (RFC 9728), where 401 answers point clients. Checked like
    // /mcp: without CODEMODE_PUBLIC_URL it names the resource by the request's Host, and any Host
    // would make the gateway name another server as its resource.
    const metadata = metadataHandler(deps.auth);
    app.get(METADATA_PATH, checkHost, metadata);
    app.get(`${METADATA_PATH}/mcp`, checkHost, metadata);
  }
  if (deps.auth) app.use('/mcp', authMiddleware(deps.auth));
  const budget = new BodyBudget(deps.bodyBudget);
  const stalls = new StallGuard(deps.stalledResponseMs, (waitingBytes) =>
    logger.info({ waitingBytes }, 'Closed a connection whose client stopped reading its response'),
  );
  const listens = new ListenLimit();
  const rate = deps.options.userRequestsPerSecond ? new RequestRate(deps.options.userRequestsPerSecond) : undefined;
  app.all('/mcp', async (c) => {
    const user = identityOf(c.req.raw)?.user ?? '';
    const tooMany = rate?.admit(user);
    if (tooMany) {
      deps.onAdmissionRejected?.('user_requests');
      logger.info({ limit: 'user_requests' }, 'Refused an MCP request over a limit');
      return tooMany;
    }
    const outgoing = nodeResponse(c);
    if (outgoing) stalls.watch(outgoing);
    const hold = budget.hold(user);
    keepHold(c.req.raw, hold);
    const settled = [whenResponded(outgoing, hold.release)];
    try {
      const reserve = (bytes: number): BodyRefusal | undefined => {
        const full = hold.take(bytes);
        return full && { refused: bodyBudgetRefused(full, budget.limits), limit: full === 'user' ? 'user_request_bytes' : 'request_bytes' };
      };
      const incoming = nodeRequest(c);
      const stall = incoming && watchBodyProgress(incoming, deps.bodyProgressWindowMs);
      const batch = await checkBatch(c.req.raw, deps.options.maxBatchSize, MAX_MCP_BODY_BYTES, reserve, stall);
      if (batch.refused) {
        // A body too many JSON values make is bad input, and a stalled one a client's fault, not capacity refusals.
        if (batch.limit !== undefined && batch.limit !== 'json_shape' && batch.limit !== 'body_progress') deps.onAdmissionRejected?.(batch.limit);
        logger.info({ limit: batch.limit }, 'Refused an MCP request over a limit');
        return batch.refused;
      }
      const longId = oversizedId(batch.parsedBody);
      if (longId) {
        logger.info({ limit: `${longId}_length` }, 'Refused an MCP request over a limit');
        return oversizedIdRefused(longId);
      }
      const listen = listenId(batch.parsedBody);
      if (listen !== undefined) {
        const release = listens.take(user);
        if (!release) {
          logger.info({ limit: 'user_listens' }, 'Refused an MCP request over a limit');
          return listenRefused(listen, listens.max);
        }
        settled.push(whenResponded(outgoing, release));
        markListen(c.req.raw);
      }
      const request = listen !== undefined && deps.shutdown ? endedAt(deps.shutdown, c.req.raw) : batch.request;
      if (request) {
        carryIdentity(c.req.raw, request);
        keepHold(request, hold);
      }
      return await mcp.fetch(request ?? c.req.raw, batch.parsedBody === undefined ? undefined : { parsedBody: batch.parsedBody });
    } finally {
      for (const done of settled) done();
    }
  });
  return app;
}

/**
 * Whether the connection of the request `c` answered stays open for the client's next request.
 * Only an MCP request of an authenticated user within their share of connections keeps it
 * (connection-owners.ts). Probes, /metrics and the OAuth metadata are fetched now and then (the
 * kubelet's probes open a connection each time anyway), and a request refused before anyone was
 * authenticated (a wrong Host, a missing token) names no user: kept alive, such connections were
 * held by whoever sent them, against CODEMODE_MAX_CONNECTIONS, for the keep-alive timeout. And
 * while shutting down, none: the client's next request goes through the Service to a replica that
 * is still ready (a refusal would fail the call).
 */
function keepsConnection(c: Context, deps: GatewayDeps, owners: ConnectionOwners | undefined): boolean {
  if (deps.isDraining?.() || c.req.path !== '/mcp') return false;
  if (!deps.auth) return true;
  const user = identityOf(c.req.raw)?.user;
  if (user === undefined) return false;
  const socket = nodeRequest(c)?.socket;
  return owners === undefined || socket === undefined || !owners.claim(socket, user);
}

/**
 * Calls `release` when the request's response has ended (a request's body and a listen's place are
 * held till then: a streamed response (SSE) ends when the call does, and the call holds its parsed
 * arguments meanwhile). On the Node server that is the response's `close` (also when the client
 * goes away); without one (app.request in tests) it is when the handler returns, which calls the
 * returned function.
 */
function whenResponded(outgoing: ServerResponse | undefined, release: () => void): () => void {
  if (outgoing === undefined) return release;
  if (outgoing.closed) release();
  else outgoing.once('close', release);
  return () => undefined;
}

/**
 * `req` (a listen, whose body was read and parsed) with a signal that also aborts at `shutdown`: the
 * SDK ends a listen's stream when its request's signal aborts (the client went away).
 */
function endedAt(shutdown: AbortSignal, req: Request): Request {
  return new Request(req.url, { method: req.method, headers: req.headers, signal: AbortSignal.any([req.signal, shutdown]) });
}

/** The Node request under `c` (on the gateway's Node server; undefined where the app is called directly). */
function nodeRequest(c: Context): IncomingMessage | undefined {
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
  return incoming !== undefined && typeof incoming.once === 'function' ? incoming : undefined;
}

/** The Node response of a request served by @hono/node-server (undefined elsewhere, e.g. app.request). */
function nodeResponse(c: Context): ServerResponse | undefined {
  const outgoing = (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing;
  return outgoing !== undefined && typeof outgoing.once === 'function' ? outgoing : undefined;
}
