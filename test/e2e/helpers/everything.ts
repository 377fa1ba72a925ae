// The reference "everything" MCP server (npm @modelcontextprotocol/server-everything), run as a
// local process over Streamable HTTP, and an UpstreamCaller on a real MCP client connected to it:
// the upstream side of code mode for tests, until the registry of UpstreamServers (src/upstreams)
// is plugged into the operator. The operator under test runs in this process, so the caller is
// handed to startOperator directly.
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import type { ToolInfo, UpstreamCaller, UpstreamResult } from '../../../src/codemode/types.js';

export interface Everything {
  caller: UpstreamCaller;
  /** Tool calls that reached the server through the caller, by tool name. */
  reached: string[];
  stop(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

function waitForListening(proc: ChildProcess, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let log = '';
    const timer = setTimeout(() => reject(new Error(`the everything server did not start: ${log.slice(-500)}`)), timeoutMs);
    proc.stderr?.on('data', (c: Buffer) => {
      log += c.toString();
      if (/listening on port/i.test(log)) {
        clearTimeout(timer);
        resolve();
      }
    });
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the everything server exited (${code}): ${log.slice(-500)}`));
    });
  });
}

/** Starts the server under `name` and connects a client; stop() ends both. */
export async function startEverything(name = 'everything'): Promise<Everything> {
  const pkg = createRequire(import.meta.url).resolve('@modelcontextprotocol/server-everything/package.json');
  const port = await freePort();
  const proc = spawn(process.execPath, [join(dirname(pkg), 'dist/index.js'), 'streamableHttp'], {
    env: { ...process.env, PORT: String(port) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  await waitForListening(proc, 30_000);
  const client = new Client({ name: 'codemode-e2e-upstream', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`)));
  const tools: ToolInfo[] = (await client.listTools()).tools.map((t) => ({
    name: t.name,
    ...(t.description !== undefined && { description: t.description }),
    inputSchema: t.inputSchema as Record<string, unknown>,
    ...(t.outputSchema !== undefined && { outputSchema: t.outputSchema as Record<string, unknown> }),
  }));
  const reached: string[] = [];
  const caller: UpstreamCaller = {
    servers: () => [{ name, toolCount: tools.length, description: 'The MCP reference test server' }],
    tools: (server) => (server === name ? tools : undefined),
    async call(_server, tool, args, { signal, timeoutMs }): Promise<UpstreamResult> {
      reached.push(tool);
      return (await client.callTool({ name: tool, arguments: args }, { signal, timeout: timeoutMs })) as UpstreamResult;
    },
  };
  return {
    caller,
    reached,
    async stop(): Promise<void> {
      await client.close().catch(() => undefined);
      proc.kill('SIGTERM');
    },
  };
}
