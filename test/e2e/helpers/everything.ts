// An UpstreamCaller on a real MCP client connected to the reference "everything" server (started
// by ./upstream.ts): the upstream side of code mode handed straight to the broker, for tests of
// the broker itself (what reached the server, by tool). The full path through UpstreamServers and
// the gateway's registry is tested in upstreams.test.ts.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import type { ToolInfo, UpstreamCaller, UpstreamResult } from '../../../src/codemode/types.js';
import { startEverything as startServer } from './upstream.js';

export interface Everything {
  caller: UpstreamCaller;
  /** Tool calls that reached the server through the caller, by tool name. */
  reached: string[];
  stop(): Promise<void>;
}

/** Starts the server under `name` and connects a client; stop() ends both. */
export async function startEverything(name = 'everything'): Promise<Everything> {
  const server = await startServer();
  const client = new Client({ name: 'codemode-e2e-upstream', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(server.url)));
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
      await server.kill();
    },
  };
}
