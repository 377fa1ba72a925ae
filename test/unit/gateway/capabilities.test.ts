import { describe, expect, it } from 'vitest';
import { capabilitySummary } from '../../../src/gateway/tools/search-tools.js';

describe('capabilitySummary', () => {
  it.each([
    ['no servers', [], ['No upstream MCP servers are available to you']],
    [
      'ready and not ready servers',
      [
        { name: 'github', ready: true, reason: 'CatalogLoaded', toolCount: 40, callTimeoutMs: 60_000 },
        { name: 'jira', ready: false, reason: 'Unreachable', message: 'fetch failed', toolCount: 0, callTimeoutMs: 30_000 },
      ],
      [
        '2 server(s), 40 tools',
        '- github: ready, 40 tools, calls time out after 60 s',
        '- jira: not ready (Unreachable: fetch failed)',
        'search_tools',
        'mcp.<server>.<tool>',
      ],
    ],
  ] as const)('%s', (_name, servers, parts) => {
    const text = capabilitySummary(servers);
    for (const p of parts) expect(text).toContain(p);
  });
});
