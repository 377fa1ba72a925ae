// Test harness: the real gateway on a real HTTP port, driven by real MCP clients of both protocol
// eras. The RunService is an in-test implementation of our own boundary (src/runs/types.ts), not a
// stand-in for Kubernetes: the Kubernetes-backed service is tested end to end elsewhere.
import { connect, type AddressInfo, type Socket } from 'node:net';
import { request as httpRequest } from 'node:http';
import { serve } from '@hono/node-server';
import { pino } from 'pino';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client as V2Client, StreamableHTTPClientTransport as V2Transport } from '@modelcontextprotocol/client';
import { TOKENS_KEY, TokensAuthenticator } from '../../../src/auth/tokens.js';
import { createApp } from '../../../src/gateway/app.js';
import type { GatewayDeps, GatewayOptions } from '../../../src/gateway/types.js';
import type { ExecuteOptions, ExecuteRequest, RunOutcome, RunService } from '../../../src/runs/types.js';

export type Behaviour = (request: ExecuteRequest, options: ExecuteOptions) => Promise<RunOutcome>;

export interface RecordedCall {
  request: ExecuteRequest;
  options: ExecuteOptions;
  /** Settles when the behaviour finished (the "run" completed), whatever the gateway did. */
  finished: Promise<RunOutcome | Error>;
}

export function outcome(overrides: Partial<RunOutcome> = {}): RunOutcome {
  return {
    runName: 'run-abc12',
    namespace: 'codemode',
    phase: 'Succeeded',
    exitCode: 0,
    stdout: '',
    stderr: '',
    truncated: false,
    stdoutBytes: 0,
    stderrBytes: 0,
    durationMs: 42,
    ...overrides,
  };
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs whatever behaviour the current test set; echoes the code to stdout by default. */
export class InTestRunService implements RunService {
  behaviour: Behaviour = async (request) => outcome({ stdout: request.code });
  readonly calls: RecordedCall[] = [];

  execute(request: ExecuteRequest, options: ExecuteOptions = {}): Promise<RunOutcome> {
    const result = this.behaviour(request, options);
    this.calls.push({ request, options, finished: result.catch((err: unknown) => err as Error) });
    return result;
  }
}

export const TEST_OPTIONS: GatewayOptions = {
  allowedHosts: [],
  allowedOrigins: [],
  defaultTimeoutSeconds: 30,
  maxTimeoutSeconds: 600,
  maxCodeBytes: 1000,
  maxBatchSize: 10,
};

export interface ToolCallRecord {
  tool: string;
  outcome: 'ok' | 'error';
  seconds: number;
}

export interface Gateway {
  url: URL;
  port: number;
  service: InTestRunService;
  logLines: string[];
  /** What the gateway reported to its metrics sink (onToolCall), in order. */
  toolCalls: ToolCallRecord[];
  setReady(ready: boolean): void;
  setDraining(draining: boolean): void;
  close(): Promise<void>;
}

/** The static tokens of twoUserGateway's two users, alice and bob. */
export const ALICE = 'tok-alice-aaaaaaaaaaaaaaaa';
export const BOB = 'tok-bob-bbbbbbbbbbbbbbbbbbbb';

/** A gateway whose callers are ALICE and BOB (static tokens), with `extra`. */
export async function twoUserGateway(extra: Parameters<typeof startGateway>[2]): Promise<Gateway> {
  const tokens = new TokensAuthenticator(pino({ level: 'silent' }));
  tokens.load({ data: { [TOKENS_KEY]: Buffer.from(`${ALICE},alice,1\n${BOB},bob,2\n`).toString('base64') } });
  return startGateway({ maxCodeBytes: 262_144 }, { authenticator: tokens }, extra);
}

export async function startGateway(
  options: Partial<GatewayOptions> = {},
  auth?: GatewayDeps['auth'],
  extra: Pick<
    GatewayDeps,
    | 'codeMode'
    | 'sessions'
    | 'profiles'
    | 'bodyBudget'
    | 'stalledResponseMs'
    | 'bodyProgressWindowMs'
    | 'onAdmissionRejected'
    | 'shutdown'
    | 'connectionsPerUser'
  > = {},
): Promise<Gateway> {
  const service = new InTestRunService();
  const logLines: string[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => void logLines.push(line) });
  const toolCalls: ToolCallRecord[] = [];
  let ready = false;
  let draining = false;
  const deps: GatewayDeps = {
    runService: service,
    options: { ...TEST_OPTIONS, ...options },
    logger,
    isReady: () => ready,
    isDraining: () => draining,
    ...(auth && { auth }),
    onToolCall: (tool, outcome, seconds) => void toolCalls.push({ tool, outcome, seconds }),
    ...extra,
  };
  const app = createApp(deps);
  const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  const port = (server.address() as AddressInfo).port;
  return {
    url: new URL(`http://127.0.0.1:${port}/mcp`),
    port,
    service,
    logLines,
    toolCalls,
    setReady: (value) => {
      ready = value;
    },
    setDraining: (value) => {
      draining = value;
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        // Idle keep-alive sockets from the clients would otherwise hold close() open.
        (server as { closeAllConnections?: () => void }).closeAllConnections?.();
        server.close((err) => (err ? reject(err) : resolve()));
      }),
  };
}

/** The subset of both client generations the tests use. */
export interface TestClient {
  era: string;
  protocolVersion: string | undefined;
  serverInfo(): { name: string; version: string } | undefined;
  instructions(): string | undefined;
  listTools(): Promise<{ tools: Array<Record<string, unknown> & { name: string }> }>;
  capabilities(): Record<string, unknown> | undefined;
  setLoggingLevel(level: 'debug' | 'info' | 'warning' | 'error'): Promise<unknown>;
  callTool(args: Record<string, unknown>, onProgress?: (message: string | undefined) => void): Promise<ToolResult>;
  close(): Promise<void>;
}

export interface ToolResult {
  content: Array<{ type: string; text?: string }>;
  structuredContent?: unknown;
  isError?: boolean;
}

export type ClientKind = 'v1 (2025-era)' | 'v2 (2026-07-28)';

export async function connectClient(kind: ClientKind, url: URL, headers?: Record<string, string>): Promise<TestClient> {
  const requestInit = headers ? { requestInit: { headers } } : undefined;
  if (kind === 'v1 (2025-era)') {
    const transport = new V1Transport(url, requestInit);
    const client = new V1Client({ name: 'test-v1', version: '1.0.0' });
    await client.connect(transport);
    return {
      era: 'legacy',
      protocolVersion: transport.protocolVersion,
      serverInfo: () => client.getServerVersion(),
      instructions: () => client.getInstructions(),
      listTools: () => client.listTools(),
      capabilities: () => client.getServerCapabilities(),
      setLoggingLevel: (level) => client.setLoggingLevel(level),
      callTool: async (args, onProgress) =>
        (await client.callTool({ name: 'execute_code', arguments: args }, undefined, {
          ...(onProgress && { onprogress: (p) => onProgress(p.message) }),
        })) as ToolResult,
      close: () => client.close(),
    };
  }
  const transport = new V2Transport(url, requestInit);
  const client = new V2Client({ name: 'test-v2', version: '2.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  await client.connect(transport);
  return {
    era: client.getProtocolEra() ?? 'unknown',
    protocolVersion: client.getNegotiatedProtocolVersion(),
    serverInfo: () => client.getServerVersion(),
    instructions: () => client.getInstructions(),
    listTools: () => client.listTools(),
    capabilities: () => client.getServerCapabilities(),
    setLoggingLevel: (level) => client.setLoggingLevel(level),
    callTool: async (args, onProgress) =>
      (await client.callTool({ name: 'execute_code', arguments: args }, onProgress && { onprogress: (p) => onProgress(p.message) })) as ToolResult,
    close: () => client.close(),
  };
}

export function textOf(result: ToolResult): string {
  return result.content.map((part) => part.text ?? '').join('\n');
}

export interface RawResponse {
  status: number;
  body: string;
}

/** A raw HTTP request with full control over Host and Origin (fetch would rewrite them). */
export function rawRequest(
  port: number,
  path: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, method: options.method ?? 'GET', headers: options.headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

/** A 2025-era initialize request, enough to prove a request got through to the MCP handler. */
export const INITIALIZE_BODY = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } },
});

export const MCP_POST_HEADERS = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
};

/**
 * A raw connection to the gateway on `port` that has sent one MCP POST of `body` with the headers
 * a current client sends (and `token` as its bearer token), for tests that control how the answer
 * is read: `paused`, nothing is read until the test resumes the socket; `contentLength`, the length
 * declared (more than `body`: the rest of the body is still to come). Socket errors are ignored.
 */
export async function rawMcpPost(port: number, body: string, options: { token?: string; paused?: boolean; contentLength?: number } = {}): Promise<Socket> {
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => undefined);
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  if (options.paused) socket.pause();
  socket.write(
    `POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\n` +
      `mcp-protocol-version: 2025-06-18\r\n${options.token === undefined ? '' : `authorization: Bearer ${options.token}\r\n`}` +
      `content-length: ${options.contentLength ?? Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
  return socket;
}

/** A streamed (SSE) response of 32 MiB, as a large tool call's: more than the sockets' buffers take at once. */
export function largeEventStream(): Response {
  const chunk = new TextEncoder().encode('r'.repeat(1024 * 1024));
  return new Response(
    new ReadableStream({
      start(controller) {
        for (let i = 0; i < 32; i++) controller.enqueue(chunk);
        controller.close();
      },
    }),
    { headers: { 'content-type': 'text/event-stream' } },
  );
}
