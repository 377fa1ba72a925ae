// How the gateway's HTTP server treats kept-alive connections.
//
// An agent's calls come seconds apart (a model's turn between two tool calls), and Node closes an
// idle kept-alive connection after 5 s by default: the next call then pays a new connection. Node
// announces the timeout in a `Keep-Alive: timeout=N` header, which HTTP clients such as undici
// (Node's fetch) follow, so a longer one keeps the caller's connection between calls. It is also
// above the 60 s idle timeout of common load balancers and ingress controllers in front of the
// gateway, so the gateway never closes a connection the proxy is about to reuse (a 502 for that
// request). Shutdown is unaffected: server.close() closes idle connections at once, and a draining
// gateway answers with `Connection: close` (app.ts).
import type { IncomingMessage, Server } from 'node:http';
import type { Socket } from 'node:net';

/** How long an idle kept-alive connection stays open. */
export const KEEP_ALIVE_TIMEOUT_MS = 65_000;

/**
 * How long a new connection may take to send its first request's headers. Connections count
 * against CODEMODE_MAX_CONNECTIONS from the moment they are accepted, before anyone is
 * authenticated: with Node's own timeouts (headers 66 s here, then the 5-minute request timeout
 * checked every 30 s) a client that opens sockets and sends nothing, or a byte now and then, held
 * each for a minute or more, and a few thousand such sockets left no room for any user.
 */
export const FIRST_REQUEST_TIMEOUT_MS = 10_000;

/**
 * Connections from one address that may wait for their first request at once. Such a connection
 * waits milliseconds for any client (a proxy or ingress in front of the gateway sends its request
 * as soon as it connects), though a burst accepted in one turn of the event loop all wait until
 * their first bytes are read; one client opening sockets and sending nothing filled
 * CODEMODE_MAX_CONNECTIONS at ~400 a second despite the first-request timeout, and every user was
 * refused with it. Past this many (a sixteenth of the default CODEMODE_MAX_CONNECTIONS), a new
 * connection from that address is closed at once.
 */
export const WAITING_PER_ADDRESS = 256;

type ConfigurableServer = Pick<Server, 'keepAliveTimeout' | 'headersTimeout' | 'maxConnections' | 'on'>;

/**
 * Applies the gateway's connection settings to its HTTP server. `maxConnections`
 * (CODEMODE_MAX_CONNECTIONS): connections over it are closed as soon as they are accepted, so that
 * one client opening (and keeping idle) many sockets cannot take the process's descriptors and
 * memory; the requests of connections already open are served as before. A connection whose
 * first request's headers have not arrived within `firstRequestTimeoutMs` is closed, and at most
 * `waitingPerAddress` from one address wait at once; a refused authentication closes its
 * connection too (auth/middleware.ts), so a client that never authenticates holds a connection
 * for seconds, not for the keep-alive timeout.
 */
export function configureHttpServer(
  server: ConfigurableServer,
  maxConnections: number,
  firstRequestTimeoutMs = FIRST_REQUEST_TIMEOUT_MS,
  waitingPerAddress = WAITING_PER_ADDRESS,
): void {
  server.maxConnections = maxConnections;
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  // Node's guidance: the headers timeout above the keep-alive timeout, so a request that starts just
  // before an idle connection would time out is not cut by the headers timer instead.
  server.headersTimeout = Math.max(server.headersTimeout, KEEP_ALIVE_TIMEOUT_MS + 1_000);
  /** Connections waiting for their first request, by the address they come from. */
  const byAddress = new Map<string, number>();
  /** What ends a connection's wait: its timer, and its count by address. */
  const waiting = new WeakMap<Socket, () => void>();
  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? '';
    const count = byAddress.get(address) ?? 0;
    if (count >= waitingPerAddress) return void socket.destroy();
    byAddress.set(address, count + 1);
    const timer = setTimeout(() => socket.destroy(), firstRequestTimeoutMs);
    timer.unref();
    let over = false;
    const done = (): void => {
      if (over) return;
      over = true;
      clearTimeout(timer);
      waiting.delete(socket);
      const left = (byAddress.get(address) ?? 1) - 1;
      if (left > 0) byAddress.set(address, left);
      else byAddress.delete(address);
    };
    waiting.set(socket, done);
    socket.once('close', done);
  });
  server.on('request', (req: IncomingMessage) => waiting.get(req.socket)?.());
}

/** How long closing the server waits for responses still being sent before it closes their connections. */
export const CLOSE_GRACE_MS = 10_000;

/**
 * Closes `server`: no new connections, idle ones closed at once, and those with a response still
 * being sent given `graceMs`, then closed. Node's server.close() waits for them however long it
 * takes: a client reading its result slowly (never cut: stall-guard.ts) held a stopping replica
 * until the end of its grace period, which then exited 1 without its last steps (the audit flush,
 * releasing its Lease).
 */
export function closeServer(server: Pick<Server, 'close' | 'closeAllConnections'>, graceMs = CLOSE_GRACE_MS): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => server.closeAllConnections(), graceMs);
    timer.unref();
    server.close(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}
