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

type ConfigurableServer = Pick<Server, 'keepAliveTimeout' | 'headersTimeout' | 'maxConnections' | 'on'>;

/**
 * Applies the gateway's connection settings to its HTTP server. `maxConnections`
 * (CODEMODE_MAX_CONNECTIONS): connections over it are closed as soon as they are accepted, so that
 * one client opening (and keeping idle) many sockets cannot take the process's descriptors and
 * memory; the requests of connections already open are served as before. A connection whose
 * first request's headers have not arrived within `firstRequestTimeoutMs` is closed; a refused
 * authentication closes its connection too (auth/middleware.ts), so a client that never
 * authenticates holds a connection for seconds, not for the keep-alive timeout.
 */
export function configureHttpServer(server: ConfigurableServer, maxConnections: number, firstRequestTimeoutMs = FIRST_REQUEST_TIMEOUT_MS): void {
  server.maxConnections = maxConnections;
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  // Node's guidance: the headers timeout above the keep-alive timeout, so a request that starts just
  // before an idle connection would time out is not cut by the headers timer instead.
  server.headersTimeout = Math.max(server.headersTimeout, KEEP_ALIVE_TIMEOUT_MS + 1_000);
  const waiting = new WeakMap<Socket, NodeJS.Timeout>();
  server.on('connection', (socket: Socket) => {
    const timer = setTimeout(() => socket.destroy(), firstRequestTimeoutMs);
    timer.unref();
    waiting.set(socket, timer);
    socket.once('close', () => clearTimeout(timer));
  });
  server.on('request', (req: IncomingMessage) => {
    const timer = waiting.get(req.socket);
    if (timer === undefined) return;
    clearTimeout(timer);
    waiting.delete(req.socket);
  });
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
