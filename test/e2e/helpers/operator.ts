// Starts the whole operator (controller + executor + MCP gateway) in this test process against
// the real test cluster, in its own namespace, and gives MCP clients of both protocol eras.
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

export { startOperator, type RunningOperator } from './start-operator.js';

export type Era = '2025' | 'current';

/** A connected MCP client of the given protocol era. */
export interface TestClient {
  era: Era;
  /** `request`: the SDK's request options (default timeout 120 s). */
  callTool(name: string, args: Record<string, unknown>, onProgress?: OnProgress, request?: RequestOptions): Promise<ToolResult>;
  close(): Promise<void>;
}

export type OnProgress = (p: { progress: number; message?: string }) => void;

export interface RequestOptions {
  timeout?: number;
  resetTimeoutOnProgress?: boolean;
}

/** The SDK's options for one call: progress callback, timeout (default 120 s). */
function requestOptions(onProgress: OnProgress | undefined, request: RequestOptions = {}) {
  return { timeout: 120_000, ...request, ...(onProgress && { onprogress: onProgress }) };
}

export interface ToolResult {
  content: Array<{ type: string; text?: string }>;
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
}

/** `headers` go on every request (e.g. `authorization: Bearer …`). */
export async function connect(url: string, era: Era, headers?: Record<string, string>): Promise<TestClient> {
  const init = headers ? { requestInit: { headers } } : undefined;
  if (era === '2025') {
    const client = new ClientV1({ name: 'e2e-2025', version: '1.0.0' });
    await client.connect(new TransportV1(new URL(url), init));
    return {
      era,
      async callTool(name, args, onProgress, request): Promise<ToolResult> {
        return (await client.callTool({ name, arguments: args }, undefined, requestOptions(onProgress, request))) as ToolResult;
      },
      close: () => client.close(),
    };
  }
  const client = new ClientV2({ name: 'e2e-current', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  await client.connect(new TransportV2(new URL(url), init));
  if (client.getNegotiatedProtocolVersion() !== '2026-07-28') throw new Error('current-protocol client did not negotiate 2026-07-28');
  return {
    era,
    async callTool(name, args, onProgress, request): Promise<ToolResult> {
      return (await client.callTool({ name, arguments: args }, requestOptions(onProgress, request))) as ToolResult;
    },
    close: () => client.close(),
  };
}
