// Discovery for sandbox code: the servers a program may call, ranked search over tool names and
// descriptions, and a tool described at three levels (name, summary, full schema). Answered from
// the upstream side's cached catalogs: nothing here calls an upstream.
import { signature } from './args.js';
import type { Detail } from './frames.js';
import type { Owner } from '../api/v1alpha1/index.js';
import type { SearchHit, ToolInfo, UpstreamCaller } from './types.js';

/** The first sentence of a description, at most 200 characters. */
export function summaryOf(description: string | undefined): string {
  const d = (description ?? '').trim().replace(/\s+/g, ' ');
  const m = /^(.+?[.!?])(\s|$)/.exec(d);
  return (m?.[1] ?? d).slice(0, 200);
}

/** A tool as the program sees it at `detail`. */
export function describeTool(server: string, t: ToolInfo, detail: Detail): unknown {
  if (detail === 'name') return `${server}.${t.name}`;
  const base = { server, tool: t.name, signature: signature(t.name, t.inputSchema) };
  if (detail === 'summary') return { ...base, summary: summaryOf(t.description) };
  return { ...base, description: t.description ?? '', inputSchema: t.inputSchema, ...(t.outputSchema && { outputSchema: t.outputSchema }) };
}

function tokens(text: string): string[] {
  return text
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((t) => t.length > 1);
}

/**
 * Weighted-field ranking, used when the upstream side offers no search of its own: a query term
 * in the tool's name counts 3, in its description 1 per occurrence (dampened), rarer terms more
 * (idf). Zero scores are not hits.
 */
export function rankTools(query: string, catalog: Array<{ server: string; tool: ToolInfo }>, limit: number): SearchHit[] {
  const q = [...new Set(tokens(query))];
  const docs = catalog.map((c) => ({ ...c, name: new Set(tokens(`${c.server} ${c.tool.name}`)), desc: tokens(c.tool.description ?? '') }));
  const df = new Map(q.map((t) => [t, docs.filter((d) => d.name.has(t) || d.desc.includes(t)).length]));
  const hits = docs.map((d) => {
    let score = 0;
    for (const t of q) {
      const n = df.get(t) ?? 0;
      if (n === 0) continue;
      const idf = Math.log(1 + docs.length / n);
      const tf = d.desc.filter((x) => x === t).length;
      score += idf * ((d.name.has(t) ? 3 : 0) + tf / (tf + 1));
    }
    return { server: d.server, tool: d.tool.name, score };
  });
  return hits
    .filter((h) => h.score > 0)
    .sort((a, b) => b.score - a.score || a.server.localeCompare(b.server) || a.tool.localeCompare(b.tool))
    .slice(0, limit);
}

/** The tools among `allowed` servers that best match `query`, best first. */
export function searchTools(
  up: UpstreamCaller,
  allowed: readonly string[],
  query: string,
  limit: number,
  owner?: Owner,
): Array<{ server: string; tool: ToolInfo }> {
  const catalog = allowed.flatMap((server) => (up.tools(server, owner) ?? []).map((tool) => ({ server, tool })));
  const hits = up.search
    ? up.search(query, { servers: allowed, limit, ...(owner && { owner }) }).filter((h) => allowed.includes(h.server))
    : rankTools(query, catalog, limit);
  return hits.flatMap((h) => {
    const t = catalog.find((c) => c.server === h.server && c.tool.name === h.tool);
    return t ? [t] : [];
  });
}
