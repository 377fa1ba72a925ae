// client-node imports `fetch`, `Agent` and `ProxyAgent` from the npm undici package (8.x) for every
// API request and watch. Node carries undici too (6.x, its global fetch), and a gateway loads that
// one anyway (Hono's Request and Response are its classes); the package's copy adds ~16 MB of RSS
// and ~3 MB of heap (docs/performance.md, Memory). slim-load.ts points client-node's imports of
// 'undici' here: `fetch` and `Agent` are Node's own (a dispatcher and the fetch that uses it come
// from one undici), `ProxyAgent` loads the package on first use, and a request through a dispatcher
// that is not Node's (a proxy's) goes through the package's fetch, as before.
import { createRequire } from 'node:module';
import { lazyClass } from './lazy-auth.js';

/** The key under which every undici copy keeps the process's global dispatcher (cross-version). */
const GLOBAL_DISPATCHER = Symbol.for('undici.globalDispatcher.1');

type DispatcherClass = new (options?: object) => object;
type Fetch = (input: unknown, init?: { dispatcher?: unknown }) => Promise<Response>;

/**
 * Node's own undici Agent class. Node loads its undici on first use of any of its web globals, and
 * loading it installs an Agent as the global dispatcher: its constructor is the class. Undefined
 * when the global dispatcher is something else (set by other code or by Node's env proxy support).
 */
export function nodeAgentClass(): DispatcherClass | undefined {
  return globalDispatcherClass('Agent');
}

/**
 * Node's own undici EnvHttpProxyAgent class, when it is the global dispatcher: Node installs one
 * when started with NODE_USE_ENV_PROXY=1, and each instance reads the same HTTP_PROXY, HTTPS_PROXY
 * and NO_PROXY. Undefined otherwise.
 */
export function nodeEnvProxyAgentClass(): DispatcherClass | undefined {
  return globalDispatcherClass('EnvHttpProxyAgent');
}

function globalDispatcherClass(name: string): DispatcherClass | undefined {
  void new Response(null);
  const dispatcher = (globalThis as Record<symbol, unknown>)[GLOBAL_DISPATCHER];
  const ctor = (dispatcher as { constructor?: unknown } | undefined)?.constructor;
  return typeof ctor === 'function' && ctor.name === name && typeof (dispatcher as { dispatch?: unknown }).dispatch === 'function'
    ? (ctor as DispatcherClass)
    : undefined;
}

// From client-node's package folder: the undici it depends on (maybe nested there). Not from its
// dist folder, whose imports of 'undici' slim-load redirects here.
let load: NodeJS.Require | undefined;
function real<T>(name: string): T {
  load ??= createRequire(new URL('../package.json', import.meta.resolve('@kubernetes/client-node/dist/index.js')));
  return (load('undici') as Record<string, T>)[name] as T;
}

const NodeAgent = nodeAgentClass();

export const Agent: DispatcherClass = NodeAgent ?? lazyClass(() => real('Agent'));
export const ProxyAgent: DispatcherClass = lazyClass(() => real('ProxyAgent'));

/** Node's fetch for Node's dispatchers (and none), the package's for the package's. */
export function fetch(input: unknown, init?: { dispatcher?: unknown }): Promise<Response> {
  const dispatcher = init?.dispatcher;
  if (NodeAgent !== undefined && (dispatcher === undefined || dispatcher instanceof NodeAgent)) return (globalThis.fetch as Fetch)(input, init);
  return real<Fetch>('fetch')(input, init);
}
