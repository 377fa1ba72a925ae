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
import type { Server } from 'node:http';

/** How long an idle kept-alive connection stays open. */
export const KEEP_ALIVE_TIMEOUT_MS = 65_000;

/**
 * Applies the gateway's connection settings to its HTTP server. `maxConnections`
 * (CODEMODE_MAX_CONNECTIONS): connections over it are closed as soon as they are accepted, so that
 * one client opening (and keeping idle) many sockets cannot take the process's descriptors and
 * memory; the requests of connections already open are served as before.
 */
export function configureHttpServer(server: Pick<Server, 'keepAliveTimeout' | 'headersTimeout' | 'maxConnections'>, maxConnections: number): void {
  server.maxConnections = maxConnections;
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  // Node's guidance: the headers timeout above the keep-alive timeout, so a request that starts just
  // before an idle connection would time out is not cut by the headers timer instead.
  server.headersTimeout = Math.max(server.headersTimeout, KEEP_ALIVE_TIMEOUT_MS + 1_000);
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
