// Builds the MCP server the gateway exposes. A fresh instance serves each HTTP request (see
// app.ts), so this must stay cheap and must not hold state between requests.
import { McpServer, type CallToolResult, type RegisteredTool } from '@modelcontextprotocol/server';
import { registerExecuteCode } from './tools/execute-code.js';
import { registerFileTools } from './tools/files.js';
import { registerSessionTools } from './tools/sessions.js';
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

export function buildMcpServer(deps: GatewayDeps): McpServer {
  const server = new McpServer(
    { name: SERVER_NAME, version: SERVER_VERSION },
    { instructions: serverInstructions(deps) },
  );
  if (deps.onToolCall) instrumentTools(server, deps.onToolCall);
  registerExecuteCode(server, deps);
  registerSessionTools(server, deps);
  registerFileTools(server, deps);
  return server;
}

type ToolHandler = (...args: unknown[]) => CallToolResult | Promise<CallToolResult>;

/**
 * Every tool registered on `server` from now on reports its calls to `onCall`: one place, so a
 * new tool cannot forget its metrics. Tool names are ours, a closed set fit for a metric label.
 */
function instrumentTools(server: McpServer, onCall: NonNullable<GatewayDeps['onToolCall']>): void {
  const register = server.registerTool.bind(server) as unknown as (name: string, config: unknown, handler: ToolHandler) => RegisteredTool;
  const registerTool = (name: string, config: unknown, handler: ToolHandler): RegisteredTool =>
    register(name, config, async (...args) => {
      const started = performance.now();
      let outcome: 'ok' | 'error' = 'error';
      try {
        const result = await handler(...args);
        if (!result.isError) outcome = 'ok';
        return result;
      } finally {
        onCall(name, outcome, (performance.now() - started) / 1000);
      }
    });
  Object.assign(server, { registerTool });
}
