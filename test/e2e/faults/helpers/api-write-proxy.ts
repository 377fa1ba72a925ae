// An HTTPS proxy between a gateway replica and the API server that can fail the API's WRITES only,
// while reads, watches and exec streams go on: what an API server does whose storage refuses
// writes for a while. Unlike api-proxy.ts (TCP, all or nothing) it terminates TLS, with the API
// server's own serving certificate (valid for 127.0.0.1 and signed by the CA the kubeconfig
// trusts, so the replica needs no other change), and forwards each request with the kubeconfig's
// client certificate (the identity the replica would have used). Mode 'fail-writes' answers every
// POST, PUT, PATCH and DELETE with 503 ServiceUnavailable, as kube-apiserver does when it cannot
// store; 'refuse-exec' resets every new exec (or other upgrade) connection, as an API server that
// cannot be reached does, while requests go on; 'fail-exec' answers every new exec with 500, as
// kube-apiserver does when it cannot dial the kubelet (a kubelet restarting); 'pass' forwards.
// Exec and port-forward upgrades are piped as they are.
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, request as httpsRequest, type Server } from 'node:https';
import type { IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import type { Duplex } from 'node:stream';
import { KubeConfig } from '@kubernetes/client-node';
import { CLUSTER_PKI } from '../../../../scripts/cluster-paths.js';

export type WriteProxyMode = 'pass' | 'fail-writes' | 'refuse-exec' | 'fail-exec';

export interface ApiWriteProxy {
  /** A kubeconfig like $KUBECONFIG whose server is the proxy. */
  kubeconfig: string;
  setMode(mode: WriteProxyMode): void;
  /** Writes answered 503 so far (the test checks the fault happened). */
  refused(): number;
  /** Exec (upgrade) connections reset or answered 500 so far. */
  execsRefused(): number;
  close(): Promise<void>;
}

const READS = new Set(['GET', 'HEAD', 'OPTIONS']);

export async function startApiWriteProxy(kubeconfig = process.env.KUBECONFIG ?? ''): Promise<ApiWriteProxy> {
  const original = readFileSync(kubeconfig, 'utf8');
  const kc = new KubeConfig();
  kc.loadFromString(original);
  const cluster = kc.getCurrentCluster();
  const user = kc.getCurrentUser();
  if (!cluster || !user?.certData || !user.keyData || !cluster.caData)
    throw new Error(`${kubeconfig}: needs a cluster CA and a client certificate (the test cluster's admin kubeconfig)`);
  const upstream = new URL(cluster.server);
  const tlsToUpstream = {
    host: upstream.hostname,
    port: Number(upstream.port || 443),
    ca: Buffer.from(cluster.caData, 'base64'),
    cert: Buffer.from(user.certData, 'base64'),
    key: Buffer.from(user.keyData, 'base64'),
  };
  const pki = CLUSTER_PKI;
  let mode: WriteProxyMode = 'pass';
  let refused = 0;
  let execsRefused = 0;
  const server: Server = createServer({ cert: readFileSync(join(pki, 'apiserver.crt')), key: readFileSync(join(pki, 'apiserver.key')) }, (req, res) => {
    if (mode === 'fail-writes' && !READS.has(req.method ?? 'GET')) {
      refused++;
      req.resume();
      const status = {
        kind: 'Status',
        apiVersion: 'v1',
        status: 'Failure',
        reason: 'ServiceUnavailable',
        code: 503,
        message: 'storage is unavailable (fault test)',
      };
      res.writeHead(503, { 'content-type': 'application/json' }).end(JSON.stringify(status));
      return;
    }
    const up = httpsRequest({ ...tlsToUpstream, method: req.method, path: req.url, headers: req.headers }, (upRes) => {
      res.writeHead(upRes.statusCode ?? 502, upRes.rawHeaders);
      // A watch's headers come long before its first event: the client waits for them.
      res.flushHeaders();
      upRes.pipe(res);
    });
    up.on('error', () => res.destroy());
    res.on('close', () => up.destroy());
    req.pipe(up);
  });
  // Exec (WebSocket) and other upgrades: the request head as received, then bytes both ways.
  server.on('upgrade', (req: IncomingMessage, client: Duplex, head: Buffer) => {
    if (mode === 'refuse-exec') {
      execsRefused++;
      client.destroy();
      return;
    }
    if (mode === 'fail-exec') {
      execsRefused++;
      const body = JSON.stringify({
        kind: 'Status',
        apiVersion: 'v1',
        status: 'Failure',
        reason: 'InternalError',
        code: 500,
        message: 'error dialing backend: dial tcp: connect: connection refused (fault test)',
      });
      client.end(
        `HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
      return;
    }
    const up = tlsConnect({ ...tlsToUpstream, servername: upstream.hostname, ALPNProtocols: ['http/1.1'] }, () => {
      const lines = [`${req.method} ${req.url} HTTP/1.1`];
      for (let i = 0; i < req.rawHeaders.length; i += 2) lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
      up.write(`${lines.join('\r\n')}\r\n\r\n`);
      if (head.length) up.write(head);
      up.pipe(client);
      client.pipe(up);
    });
    const end = (): void => {
      up.destroy();
      client.destroy();
    };
    up.on('error', end).on('close', end);
    client.on('error', end).on('close', end);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const proxyPort = (server.address() as { port: number }).port;
  const path = join(tmpdir(), `faults-write-kubeconfig-${proxyPort}`);
  writeFileSync(path, original.replace(cluster.server, `https://127.0.0.1:${proxyPort}`), { mode: 0o600 });
  return {
    kubeconfig: path,
    setMode(next): void {
      mode = next;
    },
    refused: () => refused,
    execsRefused: () => execsRefused,
    async close(): Promise<void> {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
