// Starts the whole operator (controller + executor + MCP gateway) in this process against the
// real test cluster, in its own namespace. Kept apart from the MCP clients (operator.ts) so a
// process that measures the gateway's memory (bench/rss-probe.ts) loads only what a gateway loads.
import type { AddressInfo } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import { pino } from 'pino';
import { loadConfig, type Config } from '../../../src/config/index.js';
import { createApp } from '../../../src/gateway/app.js';
import { makeClients, type KubeClients } from '../../../src/kube/clients.js';
import { createOperator, gatewayDeps, type Operator, type OperatorOverrides } from '../../../src/operator.js';
import { testKube } from './kube.js';

export interface RunningOperator {
  config: Config;
  operator: Operator;
  clients: KubeClients;
  url: string;
  stop(): Promise<void>;
}

const POOL_VARS = ['CODEMODE_WARM_POOL_SIZE', 'CODEMODE_WARM_POOL_MIN', 'CODEMODE_WARM_POOL_MAX'];

export async function startOperator(namespace: string, env: Record<string, string> = {}, overrides: OperatorOverrides = {}): Promise<RunningOperator> {
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
  const log = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  const clients = makeClients(testKube().kc);
  const operator = createOperator(config, clients, log, undefined, overrides);
  await operator.start();
  const app = createApp(gatewayDeps(operator, config, log, { isReady: () => true }));
  const server: ServerType = await new Promise((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
  });
  const port = (server.address() as AddressInfo).port;
  return {
    config,
    operator,
    clients,
    url: `http://127.0.0.1:${port}/mcp`,
    async stop(): Promise<void> {
      await new Promise<void>((r) => server.close(() => r()));
      await operator.stop();
    },
  };
}
