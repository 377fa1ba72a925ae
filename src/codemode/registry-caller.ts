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
    tools(server: string, owner?: Owner): readonly ToolInfo[] | undefined {
      try {
        // The registry's own array (never changed in place), not a copy: copying 2,000 tools took
        // ~0.2 ms of every call a program makes, refused ones too (a stream answers ~1,000 a second).
        return registry.catalog(owner, server);
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
