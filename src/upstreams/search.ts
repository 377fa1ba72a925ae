// Ranked search over the tools of all upstreams: BM25 (minisearch's BM25+) over weighted fields —
// the name counts most, then the title, then the description — with prefix and light fuzzy
// matching, so "create issue" finds create_issue and "issues" finds list_issues. Rebuilt whenever
// a catalog changes, over at most MAX_INDEXED_CHARS of each tool's text; filtered per caller at
// query time.
import MiniSearch from 'minisearch';
import { toolSignature } from './signature.js';
import type { ToolSignature, UpstreamTool } from './types.js';

export const DEFAULT_SEARCH_LIMIT = 10;
export const MAX_SEARCH_LIMIT = 50;
/**
 * Distinct meaningful words of a query searched; the rest are ignored. Queries come from sandbox
 * code (a discovery request): each term is searched by prefix and, when long, fuzzily, so a
 * 1,000-character query of 166 words cost ~100× a normal one (15 ms against a 400-tool catalog,
 * 151 ms against 2,000) and a run may send 1,000 of them.
 */
export const MAX_QUERY_TERMS = 12;
/** Above this many terms a query is matched exactly and by prefix only, not fuzzily. */
export const MAX_FUZZY_TERMS = 4;

/**
 * Characters of one tool's name, title and description indexed, together (a title at most
 * MAX_INDEXED_TITLE_CHARS of them); the rest is not searched. An upstream may list 2,000 tools
 * with 8 KiB descriptions and titles of any length: indexing all of it took 2.5 s in one block
 * and 70 MB. What a tool does is said in its first lines.
 */
export const MAX_INDEXED_CHARS = 1024;
export const MAX_INDEXED_TITLE_CHARS = 256;

/** Words that carry no meaning in a tool query ("echo a message" → echo, message). */
const STOP_WORDS = new Set(['a', 'an', 'and', 'the', 'to', 'of', 'for', 'in', 'on', 'with', 'by', 'from', 'or', 'is', 'it', 'me', 'my', 'all', 'this', 'that']);

/** Splits snake_case, kebab-case, dotted and camelCase names and ordinary text into words. */
export function tokenize(text: string): string[] {
  return text
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1 $2')
    .split(/[^\p{L}\p{N}]+/u)
    .filter((t) => t !== '');
}

function processTerm(term: string): string | null {
  const t = term.toLowerCase();
  return STOP_WORDS.has(t) ? null : t;
}

/** The words of a query that are searched: meaningful, distinct, at most MAX_QUERY_TERMS. */
export function queryTerms(query: string): string[] {
  const terms = new Set<string>();
  for (const word of tokenize(query)) {
    const t = processTerm(word);
    if (t !== null) terms.add(t);
    if (terms.size === MAX_QUERY_TERMS) break;
  }
  return [...terms];
}

interface Doc {
  id: string;
  server: string;
  name: string;
  title: string;
  description: string;
}

/** The text of `t` that is indexed: at most MAX_INDEXED_CHARS of its name, title and description. */
function indexed(id: string, t: UpstreamTool): Doc {
  const name = t.name.slice(0, MAX_INDEXED_CHARS);
  const title = (t.title ?? '').slice(0, Math.min(MAX_INDEXED_TITLE_CHARS, MAX_INDEXED_CHARS - name.length));
  const description = (t.description ?? '').slice(0, MAX_INDEXED_CHARS - name.length - title.length);
  return { id, server: t.server, name, title, description };
}

/** Characters of `t` the index holds (what indexed() keeps): the measure of its cost to build. */
export function indexedChars(t: UpstreamTool): number {
  const title = Math.min(MAX_INDEXED_TITLE_CHARS, t.title?.length ?? 0);
  return Math.min(MAX_INDEXED_CHARS, t.name.length + title + (t.description?.length ?? 0));
}

export class ToolSearch {
  private readonly index: MiniSearch<Doc>;
  private readonly byId = new Map<string, UpstreamTool>();

  constructor(tools: Iterable<UpstreamTool>) {
    this.index = new MiniSearch<Doc>({
      fields: ['name', 'title', 'description', 'server'],
      tokenize,
      processTerm,
      searchOptions: {
        boost: { name: 4, title: 2, description: 1, server: 1 },
        prefix: (term) => term.length >= 3,
        fuzzy: (term) => (term.length >= 5 ? 0.2 : false),
        combineWith: 'OR',
      },
    });
    const docs: Doc[] = [];
    for (const t of tools) {
      const id = `${t.server}\u0000${t.name}`;
      if (this.byId.has(id)) continue;
      this.byId.set(id, t);
      docs.push(indexed(id, t));
    }
    this.index.addAll(docs);
  }

  get size(): number {
    return this.byId.size;
  }

  /**
   * The best `limit` tools for `query` among `servers`, best first (ties by server and name, so
   * equal queries give equal answers). An empty query lists tools by name.
   */
  search(query: string, servers: ReadonlySet<string>, limit = DEFAULT_SEARCH_LIMIT): ToolSignature[] {
    const n = Math.max(1, Math.min(limit, MAX_SEARCH_LIMIT));
    const wanted = [...this.byId.values()].filter((t) => servers.has(t.server));
    if (query.trim() === '') {
      return wanted
        .sort((a, b) => a.server.localeCompare(b.server) || a.name.localeCompare(b.name))
        .slice(0, n)
        .map((t) => toolSignature(t, 0));
    }
    const terms = queryTerms(query);
    const hits = this.index.search(terms.join(' '), {
      filter: (r) => servers.has(this.byId.get(r.id as string)?.server ?? ''),
      ...(terms.length > MAX_FUZZY_TERMS && { fuzzy: false }),
    });
    return hits
      .map((h) => ({ tool: this.byId.get(h.id as string), score: h.score }))
      .filter((h): h is { tool: UpstreamTool; score: number } => h.tool !== undefined)
      .sort((a, b) => b.score - a.score || a.tool.server.localeCompare(b.tool.server) || a.tool.name.localeCompare(b.tool.name))
      .slice(0, n)
      .map((h) => toolSignature(h.tool, Math.round(h.score * 1000) / 1000));
  }
}
