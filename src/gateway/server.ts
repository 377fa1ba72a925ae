// Builds the MCP servers the gateway exposes. A fresh McpServer serves each HTTP request (see
// app.ts) and holds no state between requests. What is the same for every request is made once
// per gateway by mcpServerFactory: the tools' zod schemas (≈1 ms of CPU to build for all tools),
// their JSON Schema conversions (the SDK converts per McpServer instance) and the instructions.
import { McpServer, type CallToolResult, type ServerContext } from '@modelcontextprotocol/server';
import { deepFreeze } from '../util/deep-freeze.js';
import { holdOf } from './body-budget.js';
import { registerExecuteCode } from './tools/execute-code.js';
import { registerFileTools } from './tools/files.js';
import { registerSessionTools } from './tools/sessions.js';
import { capabilityResource, registerSearchTools } from './tools/search-tools.js';
import type { GatewayDeps } from './types.js';

export const SERVER_NAME = 'codemode-operator';
/** Kept equal to package.json's version by a unit test (no JSON import in the build output). */
export const SERVER_VERSION = '0.1.0';

export function serverInstructions(deps: GatewayDeps): string {
  const { defaultTimeoutSeconds, maxTimeoutSeconds, maxCodeBytes } = deps.options;
  return [
    'codemode-operator runs code for you in hardened, short-lived Kubernetes sandbox pods.',
    'Use the execute_code tool to run a complete program in python (default), bash, sh or node',
    '(javascript). Each call starts from a clean sandbox with no network access; nothing',
    'persists between calls, so include all the code a step needs and print the results you',
    'want to read. A non-zero exit code is returned as a normal result with stderr; time-outs,',
    'out-of-memory kills and refused requests come back as tool errors with a hint.',
    `Limits: code up to ${maxCodeBytes} bytes; timeout_seconds defaults to`,
    `${defaultTimeoutSeconds} and may be raised to ${maxTimeoutSeconds}. Every run is recorded`,
    'as a SandboxRun resource named in the result.',
    ...(deps.sessions
      ? [
          'For multi-step work, create_session starts a persistent interpreter: pass its name as',
          '`session` to execute_code (state persists) and use read_file, write_file and list_files',
          'for its /workspace. Idle sessions are deleted; close_session when done.',
        ]
      : []),
  ].join(' ');
}

/**
 * What the tool modules need of a server: registerTool with the SDK's own signatures, so each
 * handler is type-checked against its schemas.
 */
export type ToolRegistry = Pick<McpServer, 'registerTool'>;

type ToolHandler = (...args: unknown[]) => CallToolResult | Promise<CallToolResult>;

interface ToolDefinition {
  name: string;
  config: { inputSchema?: unknown; outputSchema?: unknown };
  handler: ToolHandler;
}

/** Returns a function that builds a ready McpServer per request from tools defined once. */
export function mcpServerFactory(deps: GatewayDeps): () => McpServer {
  const instructions = serverInstructions(deps);
  const tools = defineTools(deps);
  const resource = deps.upstreams && capabilityResource(deps.upstreams);
  return () => {
    // logging: execute_code sends each run's outcome as a log notification (logger codemode.run)
    // at the level the client asks for per request (2026-07-28: io.modelcontextprotocol/logLevel;
    // none asked, none sent). logging/setLevel (deprecated in 2026-07-28, checked by the MCP
    // conformance suite) is answered, but a level set by one request cannot outlive its
    // per-request server: older clients get the notifications unfiltered.
    const server = new McpServer({ name: SERVER_NAME, version: SERVER_VERSION }, { instructions, capabilities: { logging: {} } });
    const register = server.registerTool.bind(server) as unknown as (name: string, config: object, handler: ToolHandler) => unknown;
    for (const tool of tools) register(tool.name, tool.config, tool.handler);
    if (resource) server.registerResource(resource.name, resource.uri, resource.config, resource.read);
    return server;
  };
}

function defineTools(deps: GatewayDeps): ToolDefinition[] {
  const tools: ToolDefinition[] = [];
  const registry = {
    registerTool(name: string, config: ToolDefinition['config'], handler: ToolHandler): void {
      cacheJsonSchema(config.inputSchema);
      cacheJsonSchema(config.outputSchema);
      const held = heldWhileRunning(handler);
      tools.push({ name, config, handler: deps.onToolCall ? timed(name, held, deps.onToolCall) : held });
    },
  } as unknown as ToolRegistry;
  registerExecuteCode(registry, deps);
  registerSessionTools(registry, deps);
  registerFileTools(registry, deps);
  registerSearchTools(registry, deps);
  return tools;
}

/**
 * A tool call keeps its request's share of the body budget (body-budget.ts) until it returns, even
 * after its response has ended: a client that sent a large call and went away at once freed its
 * share while the call, waiting for its session, still held the parsed arguments, so it could send
 * another and leave again, without bound. The handler's last argument is its context.
 */
function heldWhileRunning(handler: ToolHandler): ToolHandler {
  return async (...args) => {
    const done = holdOf((args.at(-1) as Partial<ServerContext> | undefined)?.http?.req)?.retain();
    try {
      return await handler(...args);
    } finally {
      done?.();
    }
  };
}

/**
 * Every tool reports its calls to `onCall`: one place, so a new tool cannot forget its metrics.
 * Tool names are ours, a closed set fit for a metric label.
 */
function timed(name: string, handler: ToolHandler, onCall: NonNullable<GatewayDeps['onToolCall']>): ToolHandler {
  return async (...args) => {
    const started = performance.now();
    let outcome: 'ok' | 'error' = 'error';
    try {
      const result = await handler(...args);
      if (!result.isError) outcome = 'ok';
      return result;
    } finally {
      onCall(name, outcome, (performance.now() - started) / 1000);
    }
  };
}

interface JsonSchemaConverter {
  input(options: unknown): unknown;
  output(options: unknown): unknown;
}
interface StandardProps {
  jsonSchema?: JsonSchemaConverter;
}

const cached = new WeakSet<object>();

/**
 * Memoises a schema's Standard JSON Schema conversion (`~standard.jsonSchema`), which the SDK
 * calls for every McpServer instance: the schema never changes, so neither does its JSON Schema.
 * The result is frozen so no consumer can change what every later request is served.
 */
function cacheJsonSchema(schema: unknown): void {
  if (typeof schema !== 'object' || schema === null || cached.has(schema)) return;
  const holder = schema as { '~standard': StandardProps };
  const std = holder['~standard'];
  const convert = std.jsonSchema;
  if (!convert) return;
  const memo = new Map<string, unknown>();
  const memoised =
    (io: 'input' | 'output') =>
    (options: unknown): unknown => {
      const key = `${io} ${JSON.stringify(options)}`;
      if (!memo.has(key)) memo.set(key, deepFreeze(convert[io](options)));
      return memo.get(key);
    };
  // zod accepts an assigned `~standard` (its setter keeps it on the instance).
  holder['~standard'] = { ...std, jsonSchema: { input: memoised('input'), output: memoised('output') } };
  cached.add(schema);
}
