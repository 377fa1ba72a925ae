// HTTP wiring of the gateway: probes and the MCP endpoint. Transport only; tools live in tools/.
//
// /mcp is served by the SDK's createMcpHandler: it answers 2026-07-28 (per-request envelope)
// traffic and, through its stateless legacy fallback, 2025-era clients (initialize handshake,
// no session id). Both eras get a fresh McpServer per HTTP request, so no session lives in one
// replica's memory and any replica can answer any request.
import { Hono } from 'hono';
import { createMcpHandler } from '@modelcontextprotocol/server';
import { METADATA_PATH, authMiddleware, metadataHandler } from '../auth/middleware.js';
import { checkBatch } from './batch-limit.js';
import { hostValidation } from './host-validation.js';
import { mcpServerFactory } from './server.js';
import type { GatewayDeps } from './types.js';

const MAX_MCP_BODY_BYTES = 8 * 1024 * 1024;

/**
 * Creates the gateway app with /healthz, /readyz and /mcp. main.ts mounts further routes
 * (/metrics) on the returned app.
 */
export function createApp(deps: GatewayDeps): Hono {
  const logger = deps.logger.child({ component: 'gateway' });
  const mcp = createMcpHandler(mcpServerFactory(deps), {
    // Room for the largest legal call (256 KiB code + 256 KiB stdin) even when JSON escaping of
    // control characters inflates it; the SDK's 4 MiB default could refuse a valid request.
    maxRequestBodySize: MAX_MCP_BODY_BYTES,
    // Called for requests the SDK refused (bad content type, unknown protocol version, ...):
    // client mistakes, so debug level; the client already got the error.
    onerror: (err) => logger.debug({ err: err.message }, 'Rejected MCP request'),
  });

  const app = new Hono();
  app.get('/healthz', (c) => c.text('ok'));
  app.get('/readyz', (c) => {
    if (!deps.isReady()) return c.text('not ready: the operator is starting (caches not synced yet) or shutting down', 503);
    const sandbox = deps.sandboxGate?.notReady();
    return sandbox === undefined ? c.text('ok') : c.text(`not ready: ${sandbox}`, 503);
  });
  app.use('/mcp', hostValidation(deps.options));
  app.use('/mcp', async (c, next) => {
    await next();
    // Shutting down: serve, but close the kept-alive connection so the client's next request goes
    // through the Service to a replica that is still ready (a refusal would fail the call).
    if (deps.isDraining?.()) c.header('Connection', 'close');
  });
  if (deps.auth && deps.auth.authenticator.mode !== 'none') {
    // OAuth protected-resource metadata (RFC 9728), where 401 answers point clients.
    const metadata = metadataHandler(deps.auth);
    app.get(METADATA_PATH, metadata);
    app.get(`${METADATA_PATH}/mcp`, metadata);
  }
  if (deps.auth) app.use('/mcp', authMiddleware(deps.auth));
  app.all('/mcp', async (c) => {
    const batch = await checkBatch(c.req.raw, deps.options.maxBatchSize, MAX_MCP_BODY_BYTES);
    if (batch.refused) {
      deps.onAdmissionRejected?.('batch_size');
      logger.info({ limit: 'batch_size' }, 'Refused a JSON-RPC batch over the limit');
      return batch.refused;
    }
    return mcp.fetch(batch.request ?? c.req.raw, batch.parsedBody === undefined ? undefined : { parsedBody: batch.parsedBody });
  });
  return app;
}
