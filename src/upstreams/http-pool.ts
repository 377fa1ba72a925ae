// The TCP connections of one upstream client (one connect attempt and the calls made over it): an
// undici Agent of its own, closed with the client, so a reconnect never reuses a kept-alive
// connection of an attempt that failed. Such a connection can lead somewhere the URL no longer
// does: one opened to a new Service's ClusterIP before kube-proxy routed it went out through the
// node's default route, whatever answered there (an egress proxy: "HTTP 404, empty body") kept
// answering every retry over it, and the UpstreamServer stayed Unreachable (a fresh-clone run).
import type { FetchLike } from './bounded-fetch.js';
import { Agent, fetch as fetchWith } from '../kube/node-undici.js';

export interface HttpPool {
  fetch: FetchLike;
  /** No new requests; each connection closes once its requests in flight have ended. */
  close(): void;
}

/**
 * Node's own undici Agent, and Node's fetch with it (the npm undici package's pair only where the
 * global dispatcher is not Node's: node-undici.ts).
 */
export function newHttpPool(): HttpPool {
  const agent = new Agent() as { close(): Promise<void> };
  return {
    fetch: (url, init) => fetchWith(url, { ...init, dispatcher: agent }),
    close: () => void agent.close().catch(() => undefined),
  };
}
