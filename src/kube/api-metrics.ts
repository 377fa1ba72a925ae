// Counting the process's Kubernetes API requests and how they ended (issue 10: the dashboard's
// "API errors"). The metrics live behind a port (KubeApiMetrics, implemented in src/metrics), so
// this folder never imports prom-client. Three single points, one per way client-node talks to the
// API server:
// - every generated client (CoreV1Api, CustomObjectsApi, …, and the AuthenticationV1Api the
//   auth layer makes) sends through its Configuration's `httpApi`: the KubeConfig's makeApiClient
//   gives each client a counting one. It sees the HTTP status or the transport error (connection
//   refused or reset, TLS, time-out), which a `post` middleware would not: that runs only on an
//   answer, and does not see the request's method;
// - exec (and the session kernels' long-lived streams) open a websocket through the one Exec of
//   makeClients: its opening is counted (verb CONNECT, as the API server names it);
// - watches: an informer that stops on an error and is restarted (src/kube/informer.ts).
// Counting only observes: the request's promise and errors pass on untouched, and a failing
// counter is ignored.
import type { ApiConstructor, ApiType, Configuration, Exec, HttpLibrary, KubeConfig, RequestContext } from '@kubernetes/client-node';
import { SANDBOXRUN_PLURAL, SANDBOXSESSION_PLURAL, UPSTREAMSERVER_PLURAL } from '../api/v1alpha1/index.js';

/** HTTP methods of API requests, and CONNECT for an exec websocket (the API server's verb). */
export const KUBE_API_VERBS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'CONNECT', 'other'] as const;
export type KubeApiVerb = (typeof KUBE_API_VERBS)[number];

/**
 * How a request ended: `success` (2xx; for exec, the websocket opened), one per HTTP status the
 * process meets or acts on, `server_error` (5xx), `network` (no HTTP answer at all: refused,
 * reset, TLS, DNS, time-out) and `other` (any other status).
 */
export const KUBE_API_RESULTS = [
  'success',
  'invalid',
  'unauthorized',
  'forbidden',
  'not_found',
  'conflict',
  'gone',
  'too_large',
  'throttled',
  'server_error',
  'network',
  'other',
] as const;
export type KubeApiResult = (typeof KUBE_API_RESULTS)[number];

/** The resources the process keeps informers of; any other path counts as `other`. */
export const INFORMER_RESOURCES = ['pods', 'networkpolicies', SANDBOXRUN_PLURAL, SANDBOXSESSION_PLURAL, UPSTREAMSERVER_PLURAL, 'other'] as const;
export type InformerResource = (typeof INFORMER_RESOURCES)[number];

export interface KubeApiMetrics {
  /** One API request or exec connection, and how it ended. */
  request(verb: KubeApiVerb, result: KubeApiResult): void;
  /** An informer stopped on an error (its list or watch failed) and is being restarted. */
  informerRestarted(resource: InformerResource): void;
}

const STATUS_RESULTS: Readonly<Record<number, KubeApiResult>> = {
  400: 'invalid',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  409: 'conflict',
  410: 'gone',
  413: 'too_large',
  422: 'invalid',
  429: 'throttled',
};

/** The result of an HTTP status (a closed set: no status ever becomes a label by itself). */
export function resultOfStatus(status: number): KubeApiResult {
  if (status >= 200 && status < 300) return 'success';
  if (status >= 500 && status < 600) return 'server_error';
  return STATUS_RESULTS[status] ?? 'other';
}

/**
 * The result of an error thrown by client-node: an ApiException (`code`), a failed watch
 * (`statusCode`), an exec websocket refused by the API server ("Unexpected server response: 403",
 * from ws), or, with no status at all, a request that got no answer (`network`).
 */
export function resultOfError(err: unknown): KubeApiResult {
  const e = err as { code?: unknown; statusCode?: unknown; message?: unknown } | null;
  // Only a number that can be an HTTP status: a DOMException (a time-out) has a legacy `code` (23).
  const status = [e?.code, e?.statusCode].find((c): c is number => typeof c === 'number' && c >= 100 && c <= 599);
  if (status !== undefined) return resultOfStatus(status);
  const ws = typeof e?.message === 'string' ? /Unexpected server response: (\d{3})/.exec(e.message) : null;
  return ws?.[1] ? resultOfStatus(Number(ws[1])) : 'network';
}

export function verbOf(method: string): KubeApiVerb {
  const verb = method.toUpperCase();
  return (KUBE_API_VERBS as readonly string[]).includes(verb) && verb !== 'CONNECT' ? (verb as KubeApiVerb) : 'other';
}

/** The informer's resource from its watch path (`/api/v1/namespaces/ns/pods` → pods). */
export function resourceOf(path: string): InformerResource {
  const last = path.split('?')[0]?.split('/').filter(Boolean).pop() ?? '';
  return (INFORMER_RESOURCES as readonly string[]).includes(last) ? (last as InformerResource) : 'other';
}

const observed = new WeakMap<KubeConfig, KubeApiMetrics>();

/** The metrics the KubeConfig's requests are counted in (undefined when not counted). */
export function kubeApiMetricsOf(kc: KubeConfig): KubeApiMetrics | undefined {
  return observed.get(kc);
}

/** Calls a counter; counting never changes what the caller sees. */
function safely(count: () => void): void {
  try {
    count();
  } catch {
    // a metric that cannot be counted is not the request's failure
  }
}

function countingHttpApi(httpApi: HttpLibrary, kc: KubeConfig): HttpLibrary {
  return {
    send(request: RequestContext) {
      const sent = httpApi.send(request);
      const verb = verbOf(String(request.getHttpMethod()));
      // A second subscriber to the same promise: the caller's chain is returned untouched.
      sent.toPromise().then(
        (response) => safely(() => observed.get(kc)?.request(verb, resultOfStatus(response.httpStatusCode))),
        (err: unknown) => safely(() => observed.get(kc)?.request(verb, resultOfError(err))),
      );
      return sent;
    },
  };
}

/**
 * Counts the KubeConfig's requests in `metrics` from now on: every API client it makes afterwards
 * (makeApiClient) and every informer built on it. Exec is counted where it is made (countExec).
 */
export function countApiRequests(kc: KubeConfig, metrics: KubeApiMetrics): void {
  const first = !observed.has(kc);
  observed.set(kc, metrics);
  if (!first) return;
  const make = kc.makeApiClient.bind(kc);
  kc.makeApiClient = <T extends ApiType>(Api: ApiConstructor<T>): T => {
    // A constructor that hands the client its configuration with a counting httpApi (mergeConfiguration
    // keeps it for calls with options, e.g. a merge patch's Content-Type).
    const Counted = function (config: Configuration): T {
      return new Api({ ...config, httpApi: countingHttpApi(config.httpApi, kc) });
    } as unknown as ApiConstructor<T>;
    return make(Counted);
  };
}

/** Counts the openings of exec websockets (a refused exec rejects before any stream exists). */
export function countExec(exec: Exec, kc: KubeConfig): Exec {
  const open = exec.exec.bind(exec);
  exec.exec = async (...args: Parameters<Exec['exec']>): ReturnType<Exec['exec']> => {
    try {
      const ws = await open(...args);
      safely(() => observed.get(kc)?.request('CONNECT', 'success'));
      return ws;
    } catch (err) {
      safely(() => observed.get(kc)?.request('CONNECT', resultOfError(err)));
      throw err;
    }
  };
  return exec;
}
