// Composition root: config → logger → kube clients → operator (controller + executor) → gateway
// (MCP at /mcp, probes, /metrics). SIGTERM: stop being ready, finish runs in flight, exit.
import { serve } from '@hono/node-server';
import { ConfigError, loadConfig } from './config/index.js';
import { createApp } from './gateway/app.js';
import { loadKubeConfig, makeClients } from './kube/clients.js';
import { createLogger } from './log/logger.js';
import { createMetrics } from './metrics/registry.js';
import { createOperator, gatewayDeps } from './operator.js';

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(2);
    }
    throw err;
  }
  const log = createLogger(config.logLevel);
  const clients = makeClients(loadKubeConfig());
  const metrics = createMetrics();
  const operator = createOperator(config, clients, log, metrics);
  let ready = false;

  const app = createApp(gatewayDeps(operator, config, log, { isReady: () => ready, onToolCall: metrics.toolCall, onAdmissionRejected: metrics.admissionRejected }));
  app.get('/metrics', async (c) => {
    c.header('Content-Type', metrics.registry.contentType);
    return c.body(await metrics.registry.metrics());
  });

  await operator.start();
  const server = serve({ fetch: app.fetch, hostname: config.bindAddress, port: config.port }, (info) => {
    log.info({ address: info.address, port: info.port, namespace: config.namespace, identity: operator.identity }, 'Serving MCP at /mcp');
  });
  ready = true;

  let stopping = false;
  const shutdown = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    ready = false;
    log.info({ signal }, 'Shutting down: finishing runs in flight');
    server.close();
    const force = setTimeout(() => process.exit(1), 60_000);
    force.unref();
    operator
      .stop()
      .then(() => process.exit(0))
      .catch((err: unknown) => {
        log.error({ err: String(err) }, 'Shutdown failed');
        process.exit(1);
      });
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

main().catch((err: unknown) => {
  const e = err as Error;
  console.error(`codemode-operator failed to start: ${e.message}${e.cause ? ` (${String((e.cause as Error).message ?? e.cause)})` : ''}`);
  process.exit(1);
});
