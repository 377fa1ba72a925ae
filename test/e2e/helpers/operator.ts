// Starts the whole operator (controller + executor + MCP gateway) in this test process against
// the real test cluster, in its own namespace, and gives MCP clients of both protocol eras.
import type { AddressInfo } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { pino } from 'pino';
import { loadConfig, type Config } from '../../../src/config/index.js';
import { createApp } from '../../../src/gateway/app.js';
import { makeClients, type KubeClients } from '../../../src/kube/clients.js';
import { createOperator, type Operator } from '../../../src/operator.js';
import { testKube } from './kube.js';

export interface RunningOperator {
  config: Config;
  operator: Operator;
  clients: KubeClients;
  url: string;
  stop(): Promise<void>;
}

export async function startOperator(namespace: string, env: Record<string, string> = {}): Promise<RunningOperator> {
  const config = loadConfig({
    CODEMODE_NAMESPACE: namespace,
    CODEMODE_IMAGE_PULL_POLICY: 'Never',
    CODEMODE_PORT: '0',
    CODEMODE_LOG_LEVEL: 'warn',
    // Cold pods unless a test asks for the pool: tests then see deterministic pod names.
    CODEMODE_WARM_POOL_SIZE: '0',
    ...env,
  });
  const log = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  const clients = makeClients(testKube().kc);
  const operator = createOperator(config, clients, log);
  await operator.start();
  const app = createApp({
    runService: operator.runService,
    sessions: operator.sessionService,
    logger: log,
    isReady: () => true,
    options: {
      allowedHosts: config.allowedHosts,
      allowedOrigins: config.allowedOrigins,
      defaultTimeoutSeconds: config.defaultTimeoutSeconds,
      maxTimeoutSeconds: config.maxTimeoutSeconds,
      maxCodeBytes: config.maxCodeBytes,
    },
  });
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

export type Era = '2025' | 'current';

/** A connected MCP client of the given protocol era. */
export interface TestClient {
  era: Era;
  callTool(name: string, args: Record<string, unknown>, onProgress?: (p: { progress: number; message?: string }) => void): Promise<ToolResult>;
  close(): Promise<void>;
}

export interface ToolResult {
  content: Array<{ type: string; text?: string }>;
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
}

export async function connect(url: string, era: Era): Promise<TestClient> {
  if (era === '2025') {
    const client = new ClientV1({ name: 'e2e-2025', version: '1.0.0' });
    await client.connect(new TransportV1(new URL(url)));
    return {
      era,
      async callTool(name, args, onProgress): Promise<ToolResult> {
        return (await client.callTool({ name, arguments: args }, undefined, onProgress ? { onprogress: onProgress, timeout: 120_000 } : { timeout: 120_000 })) as ToolResult;
      },
      close: () => client.close(),
    };
  }
  const client = new ClientV2({ name: 'e2e-current', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  await client.connect(new TransportV2(new URL(url)));
  if (client.getNegotiatedProtocolVersion() !== '2026-07-28') throw new Error('current-protocol client did not negotiate 2026-07-28');
  return {
    era,
    async callTool(name, args, onProgress): Promise<ToolResult> {
      return (await client.callTool({ name, arguments: args }, onProgress ? { onprogress: onProgress, timeout: 120_000 } : { timeout: 120_000 })) as ToolResult;
    },
    close: () => client.close(),
  };
}
