// The API clients without client-node's API index. Its `CoreV1Api` & co. live in three generated
// files (types/ObjectParamAPI.js, ObservableAPI.js, PromiseAPI.js, ~15 MB of source) that import
// every API group of Kubernetes, and with them every request factory: loading them is most of the
// ~88 MB a gateway paid for client-node (docs/performance.md, Memory). Each group's request factory
// and response processor are also in a file of their own (gen/apis/<Group>Api.js); apiClass makes
// a client with the same interface from those two, doing what the three wrappers do per call.
import type { Configuration, ConfigurationOptions } from '@kubernetes/client-node/dist/gen/configuration.js';
import type { RequestContext, ResponseContext } from '@kubernetes/client-node/dist/gen/http/http.js';
import type { Middleware } from '@kubernetes/client-node/dist/gen/middleware.js';
import { mergeConfiguration } from '@kubernetes/client-node/dist/gen/configuration.js';
import pRetry from 'p-retry';

type Method = (...args: unknown[]) => Promise<unknown>;
type Factory = Record<string, Method | undefined>;
type Processor = Record<string, ((rsp: ResponseContext) => Promise<{ data: unknown }>) | undefined>;
type Call = (param?: unknown, options?: ConfigurationOptions) => Promise<unknown>;
const WITH_HTTP_INFO = 'WithHttpInfo';

/** The parameter names of a generated request factory method, in order, without `_options`. */
export function parameterNames(fn: (...args: never[]) => unknown): string[] {
  const src = fn.toString();
  const open = src.indexOf('(');
  const close = src.indexOf(')', open);
  if (open < 0 || close < 0) throw new Error(`client-node: cannot read the parameters of ${fn.name}`);
  return src
    .slice(open + 1, close)
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p !== '' && p !== '_options');
}

/**
 * One call, as ObjectParamAPI → ObservableAPI do it in client-node 2.0.1: the per-call options
 * merged into the client's configuration, the request built, every middleware's `pre` in order,
 * the request sent, every middleware's `post` in reverse order, the response processed (an
 * ApiException for an error status) and its body returned (or, for `…WithHttpInfo`, the whole
 * HttpInfo).
 */
async function call(
  configuration: Configuration,
  factory: Factory,
  processor: Processor,
  method: string,
  withHttpInfo: boolean,
  names: string[],
  param: unknown,
  options?: ConfigurationOptions,
): Promise<unknown> {
  const build = factory[method];
  const process = processor[`${method}${WITH_HTTP_INFO}`];
  if (!build || !process) throw new Error(`client-node: no request factory for ${method}`);
  const config = mergeConfiguration(configuration, options);
  const p = (param ?? {}) as Record<string, unknown>;
  let ctx = (await build.call(factory, ...names.map((n) => p[n]), config)) as RequestContext;
  const middleware: Middleware[] = config.middleware;
  for (const m of middleware) ctx = await m.pre(ctx).toPromise();
  let rsp = await config.httpApi.send(ctx).toPromise();
  // The generated code reverses the (possibly shared) array in place; so does this, to match.
  for (const m of middleware.reverse()) rsp = await m.post(rsp).toPromise();
  const info = await process.call(processor, rsp);
  return withHttpInfo ? info : info.data;
}

/**
 * A create refused because the namespace's ResourceQuota object changed under the API server's
 * quota admission (409 Conflict on `resourcequotas`, not on the object itself): common when many
 * creates charge one quota at once, e.g. during a rolling upgrade. Admission runs before anything
 * is stored, so the same create can be sent again; an AlreadyExists 409 names the object's kind.
 */
export function isQuotaConflict(err: unknown): boolean {
  const e = err as { code?: unknown; body?: unknown } | null;
  if (e?.code !== 409) return false;
  const body = typeof e.body === 'string' ? e.body : JSON.stringify(e.body ?? '');
  return /"kind"\s*:\s*"resourcequotas"/.test(body);
}

/** Quota conflicts are retried this often, 20 ms then doubling (~0.6 s in all), before failing. */
const QUOTA_CONFLICT_RETRIES = 5;

/**
 * How long to wait before sending a request again that the API server answered with 429 Too Many
 * Requests, or undefined for any other error. A 429 means the request was not processed (API
 * Priority and Fairness, or a resource's storage still starting — "storage is (re)initializing",
 * the first requests for a custom resource after an API-server start), so any request may be sent
 * again, after the server's Retry-After, as client-go does. Bounded: 1 s when the header is
 * missing or unreadable, at most THROTTLED_WAIT_MAX_MS.
 */
export function throttledRetryMs(err: unknown): number | undefined {
  const e = err as { code?: unknown; headers?: Record<string, unknown> } | null;
  if (e?.code !== 429) return undefined;
  const header = e.headers?.['retry-after'];
  const seconds = typeof header === 'string' && header.trim() !== '' ? Number(header) : NaN;
  return Math.min(THROTTLED_WAIT_MAX_MS, Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : 1000);
}

/** A 429 is sent again this often (client-go: 10), each after its Retry-After (at most 2 s). */
const THROTTLED_RETRIES = 3;
const THROTTLED_WAIT_MAX_MS = 2000;

/** `once`, sent again while the API server answers 429 (throttledRetryMs). */
async function withThrottledRetries(once: () => Promise<unknown>): Promise<unknown> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await once();
    } catch (err) {
      const wait = throttledRetryMs(err);
      if (wait === undefined || attempt >= THROTTLED_RETRIES) throw err;
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
}

/**
 * A class for KubeConfig.makeApiClient whose instances answer every method of the group's request
 * factory with the object-parameter signature of client-node's own client (`T`, e.g. CoreV1Api).
 */
export function apiClass<T>(Factory: new (configuration: Configuration) => object, Processor: new () => object): new (configuration: Configuration) => T {
  return class {
    constructor(configuration: Configuration) {
      const factory = new Factory(configuration) as Factory;
      const processor = new Processor() as Processor;
      const methods = new Map<string, Call>();
      const method = (key: string): Call | undefined => {
        const withHttpInfo = key.endsWith(WITH_HTTP_INFO);
        const name = withHttpInfo ? key.slice(0, -WITH_HTTP_INFO.length) : key;
        const build = factory[name];
        if (typeof build !== 'function') return undefined;
        const names = parameterNames(build);
        const once: Call = (param, options) => withThrottledRetries(() => call(configuration, factory, processor, name, withHttpInfo, names, param, options));
        if (!name.startsWith('create')) return once;
        return (param, options) =>
          pRetry(() => once(param, options), {
            retries: QUOTA_CONFLICT_RETRIES,
            minTimeout: 20,
            factor: 2,
            randomize: true,
            shouldRetry: ({ error }) => isQuotaConflict(error),
          });
      };
      return new Proxy(this, {
        get(target, key, receiver) {
          // A method set on the instance (a wrapper, as on client-node's own classes) wins.
          if (typeof key !== 'string' || Object.prototype.hasOwnProperty.call(target, key)) return Reflect.get(target, key, receiver) as unknown;
          let m = methods.get(key);
          if (!m) {
            m = method(key);
            if (!m) return Reflect.get(target, key, receiver) as unknown;
            methods.set(key, m);
          }
          return m;
        },
      });
    }
  } as unknown as new (configuration: Configuration) => T;
}
