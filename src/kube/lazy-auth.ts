// What client-node's KubeConfig module (dist/config.js) imports for kubeconfigs a gateway rarely
// has: the legacy auth-provider plug-ins (OIDC, which brings openid-client and jose's JWT code;
// Azure and GCP, which bring jsonpath-plus) and the SOCKS and HTTP proxy agents (socks,
// socks-proxy-agent, hpagent). Together ~10 MB of memory (docs/performance.md, Memory) in a
// process that authenticates with a ServiceAccount token or a client certificate. slim-load.ts
// points config.js's imports of them here; each stand-in loads the real module on first use (a
// synchronous require of the ES module, from client-node's folder), so a kubeconfig that uses
// them works as before. Exec credential plug-ins (exec_auth.js) are small and not deferred.
import { createRequire } from 'node:module';

/** config.js's imports that this module stands in for, by specifier. */
export const LAZY_AUTH_IMPORTS: Readonly<Record<string, readonly string[]>> = {
  './azure_auth.js': ['AzureAuth'],
  './gcp_auth.js': ['GoogleCloudPlatformAuth'],
  './oidc_auth.js': ['OpenIDConnectAuth'],
  'socks-proxy-agent': ['SocksProxyAgent'],
  socks: ['SocksClient'],
  hpagent: ['HttpProxyAgent', 'HttpsProxyAgent'],
};

// Resolved from client-node's dist folder (its dependencies may be nested there), but not as
// config.js: the resolve hook redirects only config.js's own imports, so these reach the real ones.
let load: NodeJS.Require | undefined;
function real<T>(specifier: string, name: string): T {
  load ??= createRequire(import.meta.resolve('@kubernetes/client-node/dist/index.js'));
  return (load(specifier) as Record<string, T>)[name] as T;
}

interface User {
  authProvider?: unknown;
}
interface Authenticator {
  isAuthProvider(user: User): boolean;
  applyAuthentication(user: User, opts: object, ...rest: unknown[]): Promise<void>;
}

/**
 * An auth-provider plug-in that loads on first use. config.js asks every plug-in, on every
 * request, whether it handles the current user; these three only handle a user with an
 * `authProvider` (unit-tested against the real ones), so a user without one loads nothing.
 */
function lazyAuthenticator(file: string, name: string): new () => Authenticator {
  return class {
    #real: Authenticator | undefined;
    private real(): Authenticator {
      this.#real ??= new (real<new () => Authenticator>(file, name))();
      return this.#real;
    }
    isAuthProvider(user: User): boolean {
      return Boolean(user?.authProvider) && this.real().isAuthProvider(user);
    }
    applyAuthentication(user: User, opts: object, ...rest: unknown[]): Promise<void> {
      return this.real().applyAuthentication(user, opts, ...rest);
    }
  };
}

type AnyClass = new (...args: unknown[]) => object;

/** A class whose `new` returns an instance of the one `load` gives (a constructor may return an object). */
export function lazyClass(load: () => AnyClass): AnyClass {
  return function (...args: unknown[]): object {
    const Real = load();
    return new Real(...args);
  } as unknown as AnyClass;
}

export const AzureAuth = lazyAuthenticator('./azure_auth.js', 'AzureAuth');
export const GoogleCloudPlatformAuth = lazyAuthenticator('./gcp_auth.js', 'GoogleCloudPlatformAuth');
export const OpenIDConnectAuth = lazyAuthenticator('./oidc_auth.js', 'OpenIDConnectAuth');
export const SocksProxyAgent = lazyClass(() => real('socks-proxy-agent', 'SocksProxyAgent'));
export const HttpProxyAgent = lazyClass(() => real('hpagent', 'HttpProxyAgent'));
export const HttpsProxyAgent = lazyClass(() => real('hpagent', 'HttpsProxyAgent'));
export const SocksClient = {
  createConnection(...args: unknown[]): unknown {
    return real<{ createConnection: (...a: unknown[]) => unknown }>('socks', 'SocksClient').createConnection(...args);
  },
};
