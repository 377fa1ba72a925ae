// search_tools and the capability resource: what an agent reads before it writes code-mode code.
// Both answer per caller: an upstream the caller may not use does not appear at all.
import type { ReadResourceResult, ServerContext } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { signatureLine } from '../../upstreams/signature.js';
import { MAX_SEARCH_LIMIT } from '../../upstreams/search.js';
import { UpstreamError, type UpstreamRegistry, type UpstreamServerInfo } from '../../upstreams/types.js';
import { callerOf } from '../caller.js';
import type { ToolRegistry } from '../server.js';
import type { GatewayDeps } from '../types.js';
import { RESULT_FORMATS } from '../../config/fields.js';
import { errorResult, okResult } from './result.js';
import { formatRows } from './result-format.js';

export const CAPABILITIES_URI = 'codemode://upstreams';

/** How sandboxed code reaches a tool; one place, so the tool, the resource and docs agree. */
export const HOW_TO_CALL =
  'Call a tool from code run by execute_code (Python): `from codemode import mcp, call_tool` then `mcp.<server>.<tool>(arg=value, …)` (awaitable inside async code, blocking elsewhere) or `call_tool("<server>", "<tool>", {…})`; Node: `await require("codemode").mcp.<server>.<tool>({…})`. Results come back unwrapped (structuredContent, else JSON, else text) and a tool error raises ToolError.';

const HitSchema = z.object({
  server: z.string(),
  name: z.string(),
  summary: z.string(),
  signature: z.string().describe('Compact parameters, e.g. (message: string, count?: integer = 1); ? marks optional ones.'),
  score: z.number(),
});

function serverLine(s: UpstreamServerInfo): string {
  if (s.ready) return `- ${s.name}: ready, ${s.toolCount} tools, calls time out after ${Math.round(s.callTimeoutMs / 1000)} s`;
  return `- ${s.name}: not ready (${s.reason}${s.message ? `: ${s.message}` : ''})`;
}

/** The capability summary as markdown: the caller's servers, their tool counts, how to call them. */
export function capabilitySummary(servers: readonly UpstreamServerInfo[]): string {
  if (servers.length === 0) return '# Upstream MCP servers\n\nNo upstream MCP servers are available to you on this gateway.\n';
  const tools = servers.reduce((n, s) => n + s.toolCount, 0);
  return [
    '# Upstream MCP servers',
    '',
    `${servers.length} server(s), ${tools} tools you may call from code:`,
    ...servers.map(serverLine),
    '',
    'Find tools with the search_tools tool (ranked by name and description; returns signatures).',
    HOW_TO_CALL,
    '',
  ].join('\n');
}

export function registerSearchTools(server: ToolRegistry, deps: GatewayDeps): void {
  const upstreams = deps.upstreams;
  if (!upstreams) return;
  const defaultFormat = deps.options.resultFormat ?? 'text';
  server.registerTool(
    'search_tools',
    {
      title: 'Search upstream tools',
      description: `Ranked search over the tools of the team's upstream MCP servers you may use (names, titles and descriptions). Returns one signature per tool: server.tool(parameters) — summary. ${HOW_TO_CALL}`,
      inputSchema: z.object({
        query: z
          .string()
          .trim()
          .min(1, 'query must not be empty: describe the task, e.g. "create a github issue"')
          .max(500)
          .describe('What you want to do, in words.'),
        limit: z.int().min(1).max(MAX_SEARCH_LIMIT).default(10).describe(`Most results (1-${MAX_SEARCH_LIMIT}, default 10).`),
        servers: z.array(z.string().min(1).max(253)).max(64).optional().describe('Only these upstream servers (default: all you may use).'),
        format: z
          .enum(RESULT_FORMATS)
          .optional()
          .describe(`How the results are written: text (one signature per line), json, or toon (a compact table). Default: ${defaultFormat}.`),
      }),
      outputSchema: z.object({ results: z.array(HitSchema) }),
      annotations: { title: 'Search upstream tools', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    (args, ctx) => {
      const caller = callerOf(ctx);
      let results: ReturnType<UpstreamRegistry['search']>;
      try {
        results = upstreams.search(caller, args.query, { limit: args.limit, ...(args.servers && { servers: args.servers }) });
      } catch (err) {
        // The caller's searches took their share of the gateway's thread: a result saying when to retry.
        if (err instanceof UpstreamError && err.code === 'search_limit') return errorResult(err.message);
        throw err;
      }
      const text =
        results.length === 0 ? noResults(upstreams, caller) : formatRows(results, args.format ?? defaultFormat, () => results.map(signatureLine).join('\n'));
      return okResult(text, { results });
    },
  );
}

/** Why a search found nothing: no servers, none ready, or no match. */
function noResults(upstreams: UpstreamRegistry, caller: ReturnType<typeof callerOf>): string {
  const servers = upstreams.servers(caller);
  if (servers.length === 0) return 'No upstream MCP servers are available to you on this gateway.';
  const ready = servers.filter((s) => s.ready).map((s) => s.name);
  return ready.length === 0
    ? `No upstream server is ready now (${servers.map((s) => `${s.name}: ${s.reason}`).join(', ')}). Retry later.`
    : `No tool matched. Try other words; servers: ${ready.join(', ')}.`;
}

/** The capability resource's definition (registered per request by the server factory). */
export function capabilityResource(upstreams: UpstreamRegistry): {
  name: string;
  uri: string;
  config: { title: string; description: string; mimeType: string };
  read: (uri: URL, ctx: ServerContext) => ReadResourceResult;
} {
  return {
    name: 'upstream-capabilities',
    uri: CAPABILITIES_URI,
    config: {
      title: 'Upstream MCP servers',
      description: 'Which upstream MCP servers you may call from code, how many tools each has, and how to call them.',
      mimeType: 'text/markdown',
    },
    read: (uri, ctx) => ({ contents: [{ uri: uri.href, mimeType: 'text/markdown', text: capabilitySummary(upstreams.servers(callerOf(ctx))) }] }),
  };
}
