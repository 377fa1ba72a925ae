// Code mode's view of the team's upstreams: the broker's UpstreamCaller (types.ts) answered by the
// gateway's UpstreamServer registry (src/upstreams). Every question carries the run's owner, so
// the registry's access lists apply to nested calls exactly as to search_tools.
import type { Owner } from '../api/v1alpha1/index.js';
import { UpstreamError, type UpstreamRegistry } from '../upstreams/types.js';
import type { ToolInfo, UpstreamCaller } from './types.js';

export function registryCaller(registry: UpstreamRegistry): UpstreamCaller {
  return {
    // Ready or not: a server the owner may use that is reconnecting is theirs still (its calls are
    // answered "retry later"), not a server they may not use. The program is told the condition's
    // reason only: its message may quote the upstream's errors (hosts, paths), the administrator's
    // to read in the UpstreamServer's status, not sandbox code's.
    servers: (owner?: Owner) =>
      registry.servers(owner).map((s) => ({
        name: s.name,
        toolCount: s.toolCount,
        ...(!s.ready && { notReady: s.reason }),
      })),
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
