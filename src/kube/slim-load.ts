// client-node's KubeConfig module (dist/config.js) imports createConfiguration and
// ServerConfiguration from './gen/index.js', which re-exports every API group and model: loading
// it costs a gateway ~35 MB of memory for code it never runs (docs/performance.md, Memory). This
// resolve hook gives config.js gen-index.ts instead, which exports those two from their own files.
// It must be registered before any module that imports config.js is linked, so entry points
// register it and then import the rest dynamically (src/main.ts). Without it everything works the
// same, only bigger; if a client-node update imports more names, linking fails at start-up.
// The hook also gives client-node's ObjectSerializer module a source that loads each model class
// on first use instead of all ~760 at start-up (lazy-models.ts); if that file's shape changes, it
// loads the original. And it gives config.js stand-ins for its auth-provider plug-ins and proxy
// agents that load the real ones on first use (lazy-auth.ts), the request factories' source
// without its comment lines (api-source.ts), and Node's own undici for its imports of the npm
// package (node-undici.ts).
import { registerHooks } from 'node:module';
import { isApiModule, withoutCommentLines } from './api-source.js';
import { LAZY_AUTH_IMPORTS } from './lazy-auth.js';
import { isObjectSerializerModule, lazyModelsSource } from './lazy-models.js';

const CONFIG_MODULE = '/@kubernetes/client-node/dist/config.js';
const CLIENT_NODE_DIST = '/@kubernetes/client-node/dist/';
let registered = false;

/** True for the import this hook redirects: './gen/index.js' from client-node's config.js. */
export function isConfigGenIndexImport(specifier: string, parentURL: string | undefined): boolean {
  return specifier === './gen/index.js' && parentURL !== undefined && parentURL.endsWith(CONFIG_MODULE);
}

/** True for config.js's imports of auth plug-ins and proxy agents that lazy-auth.ts stands in for. */
export function isLazyAuthImport(specifier: string, parentURL: string | undefined): boolean {
  return Object.hasOwn(LAZY_AUTH_IMPORTS, specifier) && parentURL !== undefined && parentURL.endsWith(CONFIG_MODULE);
}

/** True for client-node's imports of the npm undici package, which node-undici.ts stands in for. */
export function isUndiciImport(specifier: string, parentURL: string | undefined): boolean {
  return specifier === 'undici' && parentURL !== undefined && parentURL.includes(CLIENT_NODE_DIST);
}

export function loadOnlyUsedClientNode(): void {
  if (registered) return;
  registered = true;
  registerHooks({
    resolve(specifier, context, nextResolve) {
      // Resolved from here, through the chain, so tsx maps the .js names to the .ts files.
      if (isConfigGenIndexImport(specifier, context.parentURL)) return nextResolve('./gen-index.js', { ...context, parentURL: import.meta.url });
      if (isLazyAuthImport(specifier, context.parentURL)) return nextResolve('./lazy-auth.js', { ...context, parentURL: import.meta.url });
      if (isUndiciImport(specifier, context.parentURL)) return nextResolve('./node-undici.js', { ...context, parentURL: import.meta.url });
      return nextResolve(specifier, context);
    },
    load(url, context, nextLoad) {
      const loaded = nextLoad(url, context);
      const serializer = isObjectSerializerModule(url);
      if ((!serializer && !isApiModule(url)) || loaded.source === undefined) return loaded;
      const source = typeof loaded.source === 'string' ? loaded.source : new TextDecoder().decode(loaded.source);
      const slim = serializer ? lazyModelsSource(source, url)?.source : withoutCommentLines(source);
      return slim === undefined ? loaded : { ...loaded, source: slim };
    },
  });
}
