// Composition root: config → logger → kube clients → operator (controller + executor) → gateway
// (MCP at /mcp, probes, /metrics). SIGTERM: stop being ready, finish runs in flight, exit.
import type { Server } from 'node:http';
import { serve } from '@hono/node-server';
import { createAuth } from './auth/index.js';
import { ConfigError, isLoopbackBind, loadConfig } from './config/index.js';
import { loadKubeConfig, makeClients } from './kube/clients.js';
import { createLogger } from './log/logger.js';
import { createMetrics } from './metrics/registry.js';
import { createOperator, replicaApp } from './operator.js';
import { McpTraffic } from './gateway/drain.js';
import { closeServer, configureHttpServer } from './gateway/http-server.js';

/** A replica that got SIGTERM serves at least this long (endpoints update meanwhile)… */
const ENDPOINT_DRAIN_MS = 5_000;
/** …and until no request has arrived for this long (clients have moved to other replicas)… */
const QUIET_MS = 2_000;
/**
 * …or this long at most (with the chart's preStop sleep, endpoints have had 15 s to drop the
 * replica): later MCP requests are refused (503 + Retry-After), so a client calling the replica
 * directly cannot hold it, and a run admitted by then still ends within the grace period.
 */
const MAX_DRAIN_MS = 10_000;
/** Beyond the longest run: final status writes and closing streams. */
const SHUTDOWN_MARGIN_S = 15;

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
  const metrics = createMetrics();
  const clients = makeClients(loadKubeConfig(), metrics.kubeApi);
  const operator = createOperator(config, clients, log, metrics);
  const auth = createAuth(config, clients, log.child({ component: 'auth' }));
  if (config.authMode === 'none' && !isLoopbackBind(config.bindAddress)) {
    log.warn(
      { bindAddress: config.bindAddress },
      'Authentication is off (CODEMODE_AUTH_MODE=none) on an address beyond loopback: anyone who reaches the gateway can run code (accepted with CODEMODE_AUTH_NONE_BEYOND_LOOPBACK=true)',
    );
  }
  let ready = false;
  let stopping = false;
  let draining = false;

  const shuttingDown = new AbortController();
  const app = replicaApp(operator, config, log, metrics, {
    isReady: () => ready,
    isDraining: () => draining,
    shutdown: shuttingDown.signal,
    auth: auth.http,
  });

  await auth.start();
  await operator.start();
  // Requests arriving and in flight, so shutdown can wait until clients have moved elsewhere.
  const traffic = new McpTraffic(app.fetch);
  const server = serve({ fetch: traffic.fetch, hostname: config.bindAddress, port: config.port }, (info) => {
    log.info({ address: info.address, port: info.port, namespace: config.namespace, identity: operator.identity }, 'Serving MCP at /mcp');
  });
  configureHttpServer(server as Server, config.maxConnections);
  ready = true;

  // SIGTERM: readiness fails at once, so the Service stops sending new requests here; requests
  // already routed here during the endpoint update are still served until they stop coming (at
  // least ENDPOINT_DRAIN_MS, at most MAX_DRAIN_MS), then new MCP requests get 503 + Retry-After
  // (none starts a run once the operator stops: other replicas fail the runs it still holds).
  // Runs in flight get the whole time they were promised (the longest run: pod start-up plus the
  // maximum timeout); the Lease is released first.
  const shutdown = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    ready = false;
    const budgetS = config.podStartupTimeoutSeconds + config.maxTimeoutSeconds + SHUTDOWN_MARGIN_S;
    log.info({ signal, graceSeconds: budgetS }, 'Shutting down: finishing runs in flight');
    const force = setTimeout(() => {
      log.error({ graceSeconds: budgetS }, 'Runs still in flight at the end of the shutdown grace period; exiting');
      process.exit(1);
    }, budgetS * 1000);
    force.unref();
    // The operator keeps running while requests still arrive (src/gateway/drain.ts): nothing is
    // refused or closed under a client, so no call fails. Then the operator stops (waiting for the
    // runs in flight) and the process exits.
    draining = true;
    // Listen streams are not calls and never end on their own: ended now, their clients listen
    // again on a replica that stays, and server.close() below is not held open by them.
    shuttingDown.abort();
    void traffic
      .settled({ minMs: ENDPOINT_DRAIN_MS, quietMs: QUIET_MS, maxMs: MAX_DRAIN_MS })
      .then(() => auth.stop())
      .then(() => operator.stop())
      .then(() => closeServer(server as Server))
      // Whatever status write is still on its way is not cut off.
      .then(() => operator.executor.drain())
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
