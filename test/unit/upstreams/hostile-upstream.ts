// A hand-written Streamable HTTP MCP upstream (2025 era) on 127.0.0.1 whose every answer a test
// can replace, to play the hostile upstreams of the connection tests. Not a test file itself.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { UpstreamConnection, type ConnectionState } from '../../../src/upstreams/connection.js';

export interface JsonRpc {
  id?: string | number;
  method?: string;
  params?: Record<string, unknown>;
}

export interface Hooks {
  /** Answers a tools/list (default: one tool, `echo`). */
  toolsList?(msg: JsonRpc, res: ServerResponse): void;
  /** Answers a tools/call (default: a text `ok`). */
  toolsCall?(msg: JsonRpc, res: ServerResponse): void;
  /** Answers the GET of the event stream (default: 405, no stream). */
  get?(req: IncomingMessage, res: ServerResponse): void;
  /** Answers a POSTed response to a request of ours (default: 202 at once). */
  answer?(msg: JsonRpc, res: ServerResponse): void;
}

export interface Upstream {
  url: string;
  /** Requests received, by method; `get` for event-stream GETs, `answer` for POSTed responses. */
  counts: Record<string, number>;
  close(): Promise<void>;
}

export function result(res: ServerResponse, id: JsonRpc['id'], value: unknown): void {
  res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 'S1' });
  res.end(JSON.stringify({ jsonrpc: '2.0', id, result: value }));
}

/** An SSE event carrying one JSON-RPC message. */
export const event = (msg: object): string => `event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', ...msg })}\n\n`;

export async function startUpstream(hooks: Hooks = {}): Promise<Upstream> {
  const counts: Record<string, number> = {};
  const count = (key: string): void => void (counts[key] = (counts[key] ?? 0) + 1);
  const server = createServer((req, res) => {
    if (req.method === 'GET') {
      count('get');
      if (hooks.get) return hooks.get(req, res);
      return void res.writeHead(405).end();
    }
    if (req.method === 'DELETE') return void res.writeHead(200).end();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const msg = JSON.parse(Buffer.concat(chunks).toString()) as JsonRpc;
      if (!msg.method) {
        count('answer');
        return hooks.answer ? hooks.answer(msg, res) : void res.writeHead(202).end();
      }
      count(msg.method);
      if (msg.id === undefined) return void res.writeHead(202).end();
      switch (msg.method) {
        case 'initialize':
          return result(res, msg.id, {
            protocolVersion: '2025-06-18',
            capabilities: { tools: { listChanged: true } },
            serverInfo: { name: 'hostile', version: '1' },
          });
        case 'ping':
          return result(res, msg.id, {});
        case 'tools/list':
          return hooks.toolsList ? hooks.toolsList(msg, res) : result(res, msg.id, { tools: [{ name: 'echo', inputSchema: { type: 'object' } }] });
        case 'tools/call':
          return hooks.toolsCall ? hooks.toolsCall(msg, res) : result(res, msg.id, { content: [{ type: 'text', text: 'ok' }] });
        default:
          // server/discover (the 2026-era probe) among others: this upstream speaks 2025 only.
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'Method not found' } }));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${String((server.address() as AddressInfo).port)}/mcp`,
    counts,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** Polls `cond` every 10 ms; throws after `ms`. */
export async function until(cond: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('Timed out waiting');
    await sleep(10);
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** A connection to `url` and every state it reported. */
export function connect(url: string, headers: Record<string, string> = {}): { conn: UpstreamConnection; states: ConnectionState[] } {
  const states: ConnectionState[] = [];
  const conn = new UpstreamConnection(
    'hostile',
    { url, headers },
    { healthIntervalMs: 60_000, requestTimeoutMs: 5_000, messageMaxBytes: 16 << 20, onState: (s) => states.push(s), log: pino({ level: 'silent' }) },
  );
  conn.start();
  return { conn, states };
}
