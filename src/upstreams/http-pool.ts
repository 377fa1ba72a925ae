// The TCP connections of one upstream client (one connect attempt and the calls made over it): an
// undici Agent of its own, closed with the client, so a reconnect never reuses a kept-alive
// connection of an attempt that failed. Such a connection can lead somewhere the URL no longer
// does: one opened to a new Service's ClusterIP before kube-proxy routed it went out through the
// node's default route, whatever answered there (an egress proxy: "HTTP 404, empty body") kept
// answering every retry over it, and the UpstreamServer stayed Unreachable (a fresh-clone run).
import type { FetchLike } from './bounded-fetch.js';
import { nodeAgentClass, nodeEnvProxyAgentClass } from '../kube/node-undici.js';

export interface HttpPool {
  fetch: FetchLike;
  /** No new requests; each connection closes once its requests in flight have ended. */
  close(): void;
}

type Dispatcher = { close(): Promise<void> };

/**
 * The class a pool's dispatcher is made from: Node's own Agent, or Node's EnvHttpProxyAgent where
 * the process was started with NODE_USE_ENV_PROXY=1 (so upstream requests keep going through the
 * proxy that the environment names, as they do with the global dispatcher). Undefined where the
 * global dispatcher is something else (set by code this gateway does not know): then every
 * request uses it, as the global fetch does, and nothing of it is closed.
 */
const PoolDispatcher = nodeAgentClass() ?? nodeEnvProxyAgentClass();

/** A dispatcher of its own, used with Node's fetch (both from Node's undici). */
export function newHttpPool(): HttpPool {
  if (PoolDispatcher === undefined) return { fetch: (url, init) => fetch(url, init), close: () => undefined };
  const dispatcher = new PoolDispatcher() as Dispatcher;
  return {
    fetch: (url, init) => fetch(url, { ...init, dispatcher } as RequestInit),
    close: () => void dispatcher.close().catch(() => undefined),
  };
}
