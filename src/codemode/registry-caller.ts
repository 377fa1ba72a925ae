// Code mode's view of the team's upstreams: the broker's UpstreamCaller (types.ts) answered by the
// gateway's UpstreamServer registry (src/upstreams). Every question carries the run's owner, so
// the registry's access lists apply to nested calls exactly as to search_tools.
import type { Owner } from '../api/v1alpha1/index.js';
import { UpstreamError, type UpstreamRegistry } from '../upstreams/types.js';
import type { ToolInfo, UpstreamCaller } from './types.js';

export function registryCaller(registry: UpstreamRegistry): UpstreamCaller {
  return {
    // Ready ones only: a program cannot call a server that is not connected.
    servers: (owner?: Owner) =>
      registry
        .servers(owner)
        .filter((s) => s.ready)
        .map((s) => ({ name: s.name, toolCount: s.toolCount })),
    tools(server: string, owner?: Owner): ToolInfo[] | undefined {
      try {
        return registry.catalog(owner, server).map((t) => ({
          name: t.name,
          ...(t.description !== undefined && { description: t.description }),
          inputSchema: t.inputSchema,
          ...(t.outputSchema !== undefined && { outputSchema: t.outputSchema }),
        }));
      } catch (err) {
        // Unknown, not usable by this owner, or not ready: the same "no such server" to the program.
        if (err instanceof UpstreamError) return undefined;
        throw err;
      }
    },
    catalogVersion(server: string, owner?: Owner): string | undefined {
      try {
        return registry.catalogVersion?.(owner, server);
      } catch (err) {
        if (err instanceof UpstreamError) return undefined;
        throw err;
      }
    },
    search: (query, { servers, limit, owner }) =>
      registry.search(owner, query, { servers, limit }).map((h) => ({ server: h.server, tool: h.name, score: h.score })),
    call: (server, tool, args, { signal, timeoutMs, owner }) => registry.call(owner, server, tool, args, { signal, timeoutMs }),
  };
}
