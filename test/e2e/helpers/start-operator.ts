// Starts the whole operator (controller + executor + MCP gateway) in this process against the
// real test cluster, in its own namespace. Kept apart from the MCP clients (operator.ts) so a
// process that measures the gateway's memory (bench/rss-probe.ts) loads only what a gateway loads.
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import { pino, type Logger } from 'pino';
import { loadConfig, type Config } from '../../../src/config/index.js';
import { createAuth } from '../../../src/auth/index.js';
import { createApp } from '../../../src/gateway/app.js';
import { configureHttpServer } from '../../../src/gateway/http-server.js';
import { loadKubeConfig, makeClients, type KubeClients } from '../../../src/kube/clients.js';
import { createMetrics, type Metrics } from '../../../src/metrics/registry.js';
import { createOperator, gatewayDeps, replicaApp, type Operator } from '../../../src/operator.js';
import type { UpstreamCaller } from '../../../src/codemode/types.js';

export interface RunningOperator {
  config: Config;
  operator: Operator;
  clients: KubeClients;
  url: string;
  /** With the sandbox check or `metrics` on: the registry the test reads. */
  metrics?: Metrics;
  /** With `metrics` on: where GET /metrics is served (what a Prometheus scrapes). */
  metricsUrl?: string;
  stop(): Promise<void>;
}

export interface StartOptions {
  /**
   * Run the sandbox self-check (canary pods, the gate on code). Off by default: tests of other
   * features should neither wait for it nor see its pods; test/e2e/sandbox-check.test.ts turns it on.
   */
  sandboxCheck?: boolean;
  /** The session kernels to ship instead of runtime/ (two runtime versions side by side). */
  runtimeFiles?: Readonly<Record<string, string>>;
  /** Metrics as main.ts wires them, tool calls and gateway refusals included, served at /metrics. */
  metrics?: boolean;
  /** Code mode: the upstream MCP servers sandbox code may call (a real MCP client in the tests). */
  upstreams?: UpstreamCaller;
  /** The operator's logger (a test that checks what is logged); silent by default. */
  logger?: Logger;
}

const POOL_VARS = ['CODEMODE_WARM_POOL_SIZE', 'CODEMODE_WARM_POOL_MIN', 'CODEMODE_WARM_POOL_MAX'];

export async function startOperator(namespace: string, env: Record<string, string> = {}, options: StartOptions = {}): Promise<RunningOperator> {
  const config = loadConfig({
    CODEMODE_NAMESPACE: namespace,
    CODEMODE_IMAGE_PULL_POLICY: 'Never',
    CODEMODE_PORT: '0',
    CODEMODE_LOG_LEVEL: 'warn',
    // Cold pods unless a test asks for the pool: tests then see deterministic pod names. A pool
    // is fixed at CODEMODE_WARM_POOL_SIZE unless the test sets a maximum: on a shared node a pool
    // grown by one test's calls would take CPU requests other tests' pods need.
    ...(POOL_VARS.some((v) => env[v] !== undefined) ? {} : { CODEMODE_WARM_POOL_SIZE: '0' }),
    ...(env.CODEMODE_WARM_POOL_SIZE !== undefined && env.CODEMODE_WARM_POOL_MAX === undefined ? { CODEMODE_WARM_POOL_MAX: env.CODEMODE_WARM_POOL_SIZE } : {}),
    ...env,
  });
  const log = options.logger ?? pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  const metrics = options.sandboxCheck === true || options.metrics === true ? createMetrics() : undefined;
  const clients = makeClients(loadKubeConfig(), metrics?.kubeApi);
  const operator = createOperator(config, clients, log, metrics, {
    sandboxCheck: options.sandboxCheck === true,
    ...(options.runtimeFiles && { runtimeFiles: options.runtimeFiles }),
    ...(options.upstreams && { upstreams: options.upstreams }),
  });
  const auth = createAuth(config, clients, log);
  await auth.start();
  await operator.start();
  // With metrics, the replica's own wiring (src/operator.ts replicaApp: counted tool calls,
  // refusals and authentications, /metrics).
  const app =
    options.metrics === true && metrics !== undefined
      ? replicaApp(operator, config, log, metrics, { isReady: () => true, isDraining: () => false, auth: auth.http })
      : createApp(gatewayDeps(operator, config, log, { isReady: () => true, auth: auth.http }));
  const server: ServerType = await new Promise((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
  });
  // As main.ts: callers' kept-alive connections outlive a pause between calls.
  configureHttpServer(server as Server, config.maxConnections);
  const port = (server.address() as AddressInfo).port;
  return {
    config,
    operator,
    clients,
    url: `http://127.0.0.1:${port}/mcp`,
    ...(metrics !== undefined && { metrics }),
    ...(options.metrics === true && { metricsUrl: `http://127.0.0.1:${port}/metrics` }),
    async stop(): Promise<void> {
      await new Promise<void>((r) => server.close(() => r()));
      await auth.stop();
      await operator.stop();
    },
  };
}
