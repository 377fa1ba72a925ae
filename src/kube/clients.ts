// The Kubernetes API clients every part of the process shares (one KubeConfig, one HTTP agent).
import { createHash } from 'node:crypto';
import tls from 'node:tls';
import type { CoordinationV1Api, CoreV1Api, CustomObjectsApi, EventsV1Api, NetworkingV1Api } from '@kubernetes/client-node';
// Deep imports: the package index loads every API group and model (api-client.ts, slim-load.ts).
import { KubeConfig } from '@kubernetes/client-node/dist/config.js';
import { Exec } from '@kubernetes/client-node/dist/exec.js';
import { CoordinationV1ApiRequestFactory, CoordinationV1ApiResponseProcessor } from '@kubernetes/client-node/dist/gen/apis/CoordinationV1Api.js';
import { CoreV1ApiRequestFactory, CoreV1ApiResponseProcessor } from '@kubernetes/client-node/dist/gen/apis/CoreV1Api.js';
import { CustomObjectsApiRequestFactory, CustomObjectsApiResponseProcessor } from '@kubernetes/client-node/dist/gen/apis/CustomObjectsApi.js';
import { EventsV1ApiRequestFactory, EventsV1ApiResponseProcessor } from '@kubernetes/client-node/dist/gen/apis/EventsV1Api.js';
import { NetworkingV1ApiRequestFactory, NetworkingV1ApiResponseProcessor } from '@kubernetes/client-node/dist/gen/apis/NetworkingV1Api.js';
import { isNetworkError } from '../util/network-error.js';
import { apiClass } from './api-client.js';
import { countApiRequests, countExec, type KubeApiMetrics } from './api-metrics.js';

export interface KubeClients {
  kc: KubeConfig;
  core: CoreV1Api;
  custom: CustomObjectsApi;
  networking: NetworkingV1Api;
  events: EventsV1Api;
  coordination: CoordinationV1Api;
  exec: Exec;
}

/** Loads the in-cluster config, $KUBECONFIG or ~/.kube/config (client-node's default order). */
export function loadKubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromDefault();
  if (!kc.getCurrentCluster()) {
    throw new Error('No Kubernetes cluster configured: set KUBECONFIG, run in a pod, or start the local test cluster with `npm run cluster:up`.');
  }
  return kc;
}

/**
 * client-node 2.0.1 builds a new undici Agent for every API request (in
 * applySecurityAuthentication), so every call pays a new TCP + TLS handshake and leaves a
 * connection behind. One dispatcher per cluster and user keeps connections alive and reused.
 * Credentials in headers (tokens) are still read per request; only the transport is shared.
 */
export function reuseConnections(kc: KubeConfig): void {
  const target = kc as unknown as { createDispatcher?: (cluster: unknown, options: unknown) => unknown; codemodeReused?: boolean };
  const original = target.createDispatcher;
  if (typeof original !== 'function' || target.codemodeReused) return;
  const cache = new Map<string, unknown>();
  target.createDispatcher = (cluster: unknown, options: unknown): unknown => {
    const c = cluster as { name?: string; server?: string } | null;
    const key = `${c?.name ?? ''}|${c?.server ?? ''}|${kc.getCurrentUser()?.name ?? ''}`;
    if (!cache.has(key)) cache.set(key, original.call(kc, cluster, options));
    return cache.get(key);
  };
  target.codemodeReused = true;
  shareSecureContexts(kc);
}

/**
 * Exec websockets (ws, not undici) get their TLS options from applyToHTTPSOptions, and tls.connect
 * builds a new SecureContext from them for every connection: ~2 ms of CPU and ~84 KiB held per
 * open stream (measured here), i.e. per session kernel stream and per cold run's exec. One context
 * per distinct TLS material is shared instead (tls.connect uses `secureContext` when given;
 * `rejectUnauthorized` and `servername` still apply per connection).
 */
function shareSecureContexts(kc: KubeConfig): void {
  const original = kc.applyToHTTPSOptions.bind(kc);
  const contexts = new Map<string, tls.SecureContext>();
  kc.applyToHTTPSOptions = async (opts): Promise<void> => {
    await original(opts);
    const o = opts as tls.SecureContextOptions & { secureContext?: tls.SecureContext };
    if (o.secureContext) return;
    const material = { ca: o.ca, cert: o.cert, key: o.key, pfx: o.pfx, passphrase: o.passphrase };
    const hash = createHash('sha256');
    for (const [name, value] of Object.entries(material))
      hash.update(`${name}:${value === undefined ? '-' : Buffer.isBuffer(value) ? value.toString('base64') : JSON.stringify(value)};`);
    const key = hash.digest('hex');
    let ctx = contexts.get(key);
    if (!ctx) {
      try {
        ctx = tls.createSecureContext(material);
      } catch {
        return; // unusable material: tls.connect reports it for the connection, as before
      }
      contexts.set(key, ctx);
    }
    o.secureContext = ctx;
  };
}

/** `apiMetrics`: where the requests of these clients (and of informers on `kc`) are counted. */
export function makeClients(kc: KubeConfig, apiMetrics?: KubeApiMetrics): KubeClients {
  reuseConnections(kc);
  if (apiMetrics) countApiRequests(kc, apiMetrics);
  return {
    kc,
    core: kc.makeApiClient(apiClass<CoreV1Api>(CoreV1ApiRequestFactory, CoreV1ApiResponseProcessor)),
    custom: kc.makeApiClient(apiClass<CustomObjectsApi>(CustomObjectsApiRequestFactory, CustomObjectsApiResponseProcessor)),
    networking: kc.makeApiClient(apiClass<NetworkingV1Api>(NetworkingV1ApiRequestFactory, NetworkingV1ApiResponseProcessor)),
    events: kc.makeApiClient(apiClass<EventsV1Api>(EventsV1ApiRequestFactory, EventsV1ApiResponseProcessor)),
    coordination: kc.makeApiClient(apiClass<CoordinationV1Api>(CoordinationV1ApiRequestFactory, CoordinationV1ApiResponseProcessor)),
    exec: countExec(new Exec(kc), kc),
  };
}

/** HTTP status of an ApiException (or undefined for transport errors). */
export function statusOf(err: unknown): number | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
}

export function isNotFound(err: unknown): boolean {
  return statusOf(err) === 404;
}

export function isConflict(err: unknown): boolean {
  return statusOf(err) === 409;
}

/** A readable one-line message from an ApiException, whose body is a JSON string. */
export function apiErrorMessage(err: unknown): string {
  const e = err as { body?: unknown; message?: unknown } | null;
  if (e && typeof e.body === 'string') {
    try {
      const body = JSON.parse(e.body) as { message?: string };
      if (body.message) return body.message;
    } catch {
      // not JSON
    }
  }
  if (e && typeof e.message === 'string') return e.message.split('\n')[0] ?? e.message;
  return String(err);
}

/**
 * The object is larger than the API server or etcd accepts: 413 from the API server's body limit,
 * or etcd's "request is too large" (which the API server passes on as a 500).
 */
export function isTooLarge(err: unknown): boolean {
  return statusOf(err) === 413 || /request is too large|too large/i.test(apiErrorMessage(err));
}

/** The HTTP status the API server answered with; not a DOMException's legacy `code` (TimeoutError's is 23). */
export function httpStatus(err: unknown): number | undefined {
  const status = statusOf(err);
  return status !== undefined && status >= 100 && status <= 599 ? status : undefined;
}

/** A client-side request timeout (AbortSignal.timeout's TimeoutError) anywhere in the cause chain. */
export function isRequestTimeout(err: unknown, depth = 0): boolean {
  if (err === null || typeof err !== 'object' || depth > 5) return false;
  const e = err as { name?: unknown; error?: unknown; cause?: unknown };
  return e.name === 'TimeoutError' || isRequestTimeout(e.error, depth + 1) || isRequestTimeout(e.cause, depth + 1);
}

/**
 * Pure: whether a failed request may succeed when tried again — the API server answered 429 or 5xx
 * (but not etcd's "request is too large", which never fits), or did not answer at all (a network
 * error, a request timeout). Any other answer, and any error thrown before a request left (a
 * TypeError or RangeError building or sending the body), fails the same way every time.
 */
export function retryable(err: unknown): boolean {
  const status = httpStatus(err);
  if (status !== undefined) return (status === 429 || status >= 500) && !isTooLarge(err);
  return isNetworkError(err) || isRequestTimeout(err);
}
