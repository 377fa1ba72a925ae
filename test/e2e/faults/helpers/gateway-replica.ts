// A gateway replica in its own process (started through gateway-child.ts, which registers the
// entry point's hook first), so a fault test can SIGKILL or SIGTERM it. Wired like
// src/main.ts (operator + auth + MCP app + /metrics, the same drain on SIGTERM: readiness off, responses close
// their connection, stop once no MCP request arrived for a while, then the operator's own drain)
// but with the sandbox self-check off, as in every e2e test: its canary pods would delay code by
// up to minutes on the shared node; and no minimum drain time (the test decides how long calls
// still come). Configured only through CODEMODE_* env and KUBECONFIG (and FAULT_RUNTIME_VARIANT:
// another version of the kernels, runtime-variant.ts); prints one JSON line {"url","identity"} on
// stdout once it serves.
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { pino } from 'pino';
import { createAuth } from '../../../../src/auth/index.js';
import { loadConfig } from '../../../../src/config/index.js';
import { McpTraffic } from '../../../../src/gateway/drain.js';
import { loadKubeConfig, makeClients } from '../../../../src/kube/clients.js';
import { createMetrics } from '../../../../src/metrics/registry.js';
import { createOperator, replicaApp } from '../../../../src/operator.js';
import { RUNTIME_VARIANT_ENV, runtimeFiles } from './runtime-variant.js';

const QUIET_MS = 2_000;

async function main(): Promise<void> {
  const config = loadConfig();
  const log = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  const metrics = createMetrics();
  const clients = makeClients(loadKubeConfig(), metrics.kubeApi);
  const variant = process.env[RUNTIME_VARIANT_ENV];
  const operator = createOperator(config, clients, log, metrics, { sandboxCheck: false, ...(variant && { runtimeFiles: runtimeFiles(variant) }) });
  const auth = createAuth(config, clients, log);
  let draining = false;
  let ready = false;
  const app = replicaApp(operator, config, log, metrics, { isReady: () => ready, isDraining: () => draining, auth: auth.http });
  await auth.start();
  await operator.start();
  const traffic = new McpTraffic(app.fetch);
  const server = serve({ fetch: traffic.fetch, hostname: '127.0.0.1', port: config.port }, (info: AddressInfo) => {
    ready = true;
    process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${info.port}/mcp`, identity: operator.identity })}\n`);
  });
  process.on('SIGTERM', () => {
    if (draining) return;
    draining = true;
    ready = false;
    void traffic
      .settled({ minMs: 0, quietMs: QUIET_MS })
      .then(() => auth.stop())
      .then(() => operator.stop())
      // As src/main.ts, without waiting for the server's connections to close: the records of
      // runs a late request started still land before the exit.
      .then(() => {
        server.close();
        return operator.executor.drain();
      })
      .then(() => process.exit(0))
      .catch((err: unknown) => {
        process.stderr.write(`gateway-child: shutdown failed: ${String(err)}\n`);
        process.exit(1);
      });
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`gateway-child: ${String(err)}\n`);
  process.exit(1);
});
