// The TCP connections of one upstream client (one connect attempt and the calls made over it): an
// undici Agent of its own, closed with the client, so a reconnect never reuses a kept-alive
// connection of an attempt that failed. Such a connection can lead somewhere the URL no longer
// does: one opened to a new Service's ClusterIP before kube-proxy routed it went out through the
// node's default route, whatever answered there (an egress proxy: "HTTP 404, empty body") kept
// answering every retry over it, and the UpstreamServer stayed Unreachable (a fresh-clone run).
import type { FetchLike } from './bounded-fetch.js';
import { Agent, fetch as undiciFetch, nodeAgentClass, nodeEnvProxyAgentClass } from '../kube/node-undici.js';

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
 * global dispatcher is another undici's: the npm package's, which installs its own when it is
 * loaded before Node's fetch is first used (the gateway's entry point uses Node's first; a process
 * that imports client-node directly, as the tests and the bench do, does not).
 */
const PoolDispatcher = nodeAgentClass() ?? nodeEnvProxyAgentClass();

/**
 * A dispatcher of its own, and the fetch of the same undici: Node's, or else the package's Agent
 * with the package's fetch. Never the global dispatcher: shared by every client of the process, it
 * kept the connection a failed try had opened and handed it to the retries (an e2e run saw a
 * bridge's Service answered by an egress proxy for nine minutes, the retries' own connections
 * reaching the bridge between the proxy's answers).
 */
export function newHttpPool(): HttpPool {
  if (PoolDispatcher !== undefined) {
    const dispatcher = new PoolDispatcher() as Dispatcher;
    return {
      fetch: (url, init) => fetch(url, { ...init, dispatcher } as RequestInit),
      close: () => void dispatcher.close().catch(() => undefined),
    };
  }
  const dispatcher = new Agent() as Dispatcher;
  return {
    fetch: (url, init) => undiciFetch(url, { ...init, dispatcher } as RequestInit & { dispatcher: unknown }),
    close: () => void dispatcher.close().catch(() => undefined),
  };
}
