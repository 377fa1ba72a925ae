// A TCP proxy between a gateway replica and the API server, to make the API fail on command:
// 'reset' resets every open connection and each new one; 'stall' holds all bytes in both
// directions (requests hang) until the mode changes; 'pass' forwards. TLS passes through
// untouched (the server certificate is valid for 127.0.0.1), so the replica needs no other change.
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export type ProxyMode = 'pass' | 'reset' | 'stall';

export interface ApiProxy {
  /** A kubeconfig like $KUBECONFIG whose server is the proxy. */
  kubeconfig: string;
  setMode(mode: ProxyMode): void;
  close(): Promise<void>;
}

interface Pair {
  client: Socket;
  upstream: Socket;
  /** Bytes held while stalled, per direction. */
  held: Array<{ to: Socket; data: Buffer }>;
  stalled: boolean;
}

export async function startApiProxy(kubeconfig = process.env.KUBECONFIG ?? ''): Promise<ApiProxy> {
  const original = readFileSync(kubeconfig, 'utf8');
  const m = /server:\s*https:\/\/([^:\s/]+):(\d+)/.exec(original);
  if (!m) throw new Error(`no https server in ${kubeconfig}`);
  const [host, port] = [m[1] as string, Number(m[2])];
  let mode: ProxyMode = 'pass';
  const pairs = new Set<Pair>();
  const server: Server = createServer((client) => {
    if (mode === 'reset') return client.resetAndDestroy();
    const upstream = connect(port, host);
    const pair: Pair = { client, upstream, held: [], stalled: mode === 'stall' };
    pairs.add(pair);
    const end = (): void => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    const forward =
      (to: Socket) =>
      (data: Buffer): void => {
        if (pair.stalled) pair.held.push({ to, data });
        else to.write(data);
      };
    client.on('data', forward(upstream));
    upstream.on('data', forward(client));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const proxyPort = (server.address() as { port: number }).port;
  const path = join(tmpdir(), `faults-kubeconfig-${proxyPort}`);
  writeFileSync(path, original.replace(m[0], `server: https://127.0.0.1:${proxyPort}`), { mode: 0o600 });
  return {
    kubeconfig: path,
    setMode(next): void {
      mode = next;
      for (const p of pairs) {
        if (next === 'reset') {
          p.client.resetAndDestroy();
          p.upstream.destroy();
        } else if (next === 'stall') p.stalled = true;
        else resume(p);
      }
    },
    async close(): Promise<void> {
      for (const p of pairs) {
        p.client.destroy();
        p.upstream.destroy();
      }
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

// A stall holds the bytes (as a congested network would), then delivers them in order.
function resume(p: Pair): void {
  p.stalled = false;
  for (const h of p.held.splice(0)) h.to.write(h.data);
}
