// A tiny round-robin HTTP proxy: one address in front of several gateway processes, each request
// to the next one, like a Service in front of replicas. A request whose upstream refuses the
// connection (a stopped replica) goes to the next upstream, as kube-proxy stops routing to a gone
// endpoint. Bodies are buffered (MCP requests are small) so such a request can be sent again;
// responses (JSON or SSE streams) are piped through.
import { request, createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RoundRobin {
  url: string;
  /** How many requests each upstream answered, by index. */
  served: number[];
  close(): Promise<void>;
}

/** `upstreams`: full URLs of the same path (http://127.0.0.1:port/mcp) on each replica. */
export async function startRoundRobin(upstreams: string[]): Promise<RoundRobin> {
  const targets = upstreams.map((u) => new URL(u));
  const served = targets.map(() => 0);
  let next = 0;

  const forward = (req: IncomingMessage, body: Buffer, res: ServerResponse, tried: number): void => {
    const i = next++ % targets.length;
    const t = targets[i] as URL;
    const up = request({ host: t.hostname, port: t.port, path: req.url, method: req.method, headers: { ...req.headers, host: t.host } }, (upRes) => {
      served[i] = (served[i] ?? 0) + 1;
      res.writeHead(upRes.statusCode ?? 502, upRes.headers);
      upRes.pipe(res);
    });
    up.on('error', (err) => {
      if (!res.headersSent && tried + 1 < targets.length) return forward(req, body, res, tried + 1);
      if (!res.headersSent) res.writeHead(502).end(String(err));
      else res.destroy(err);
    });
    res.on('close', () => up.destroy());
    up.end(body);
  };

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => forward(req, Buffer.concat(chunks), res, 0));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    served,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
