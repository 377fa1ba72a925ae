// Compact text forms of a tool, for an agent's context: a one-line signature rendered from the
// JSON Schema of its arguments, a one-sentence summary, and describe() at three detail levels.
// Pure functions; the schemas come from upstreams, so every input is treated as untrusted shape.
import type { DetailLevel, ToolDescription, ToolSignature, UpstreamTool } from './types.js';

/** Longest summary (characters); the full description is one describe(…, 'full') away. */
export const MAX_SUMMARY_CHARS = 160;
/** Longest signature; beyond it the parameter list ends with `…`. */
export const MAX_SIGNATURE_CHARS = 240;
const MAX_DEPTH = 3;

type Schema = Record<string, unknown>;

function isSchema(v: unknown): v is Schema {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A schema's type in TypeScript-like notation: `string`, `integer[]`, `"a"|"b"`, `object`. */
export function renderType(schema: unknown, depth = 0): string {
  if (!isSchema(schema) || depth > MAX_DEPTH) return 'any';
  if ('const' in schema) return JSON.stringify(schema.const) ?? 'any';
  if (Array.isArray(schema.enum) && schema.enum.length > 0) {
    const values = schema.enum.slice(0, 6).map((v) => JSON.stringify(v) ?? 'null');
    return values.join('|') + (schema.enum.length > 6 ? '|…' : '');
  }
  const union = (schema.anyOf ?? schema.oneOf) as unknown;
  if (Array.isArray(union) && union.length > 0) return [...new Set(union.map((s) => renderType(s, depth + 1)))].join('|');
  const type = schema.type;
  if (Array.isArray(type)) return type.map((t) => renderType({ ...schema, type: t }, depth + 1)).join('|');
  if (type === 'array') {
    const item = renderType(schema.items, depth + 1);
    return item.includes('|') ? `(${item})[]` : `${item}[]`;
  }
  if (typeof type === 'string') return type;
  return isSchema(schema.properties) ? 'object' : 'any';
}

/** `(message: string, count?: integer = 1)` from an object schema's properties and required list. */
export function renderSignature(inputSchema: unknown): string {
  const props = isSchema(inputSchema) && isSchema(inputSchema.properties) ? inputSchema.properties : {};
  const required = new Set(isSchema(inputSchema) && Array.isArray(inputSchema.required) ? inputSchema.required.filter((r) => typeof r === 'string') : []);
  // Required parameters first, each group in the upstream's order.
  const names = Object.keys(props).sort((a, b) => Number(required.has(b)) - Number(required.has(a)));
  const parts = names.map((name) => {
    const schema = props[name];
    const dflt = isSchema(schema) && 'default' in schema ? ` = ${JSON.stringify(schema.default) ?? 'null'}` : '';
    return `${name}${required.has(name) ? '' : '?'}: ${renderType(schema)}${dflt}`;
  });
  let out = '';
  for (const [i, p] of parts.entries()) {
    const next = out === '' ? p : `${out}, ${p}`;
    if (next.length > MAX_SIGNATURE_CHARS - 2) return `(${out}${i > 0 ? ', ' : ''}…)`;
    out = next;
  }
  return `(${out})`;
}

/** The first sentence (or line) of a description, cut to MAX_SUMMARY_CHARS. */
export function summarize(description: string | undefined): string {
  const text = (description ?? '').trim();
  if (text === '') return '';
  const firstLine = text.split(/\n\s*\n|\n/)[0] ?? '';
  const sentence = /^(.*?[.!?])(\s|$)/s.exec(firstLine)?.[1] ?? firstLine;
  const clean = sentence.replace(/\s+/g, ' ').trim();
  return clean.length <= MAX_SUMMARY_CHARS ? clean : `${clean.slice(0, MAX_SUMMARY_CHARS - 1).trimEnd()}…`;
}

/** A search hit for a tool. */
export function toolSignature(tool: UpstreamTool, score: number): ToolSignature {
  return { server: tool.server, name: tool.name, summary: summarize(tool.description ?? tool.title), signature: renderSignature(tool.inputSchema), score };
}

/** One line an agent can read: `github.create_issue(title: string, body?: string) — Create an issue.` */
export function signatureLine(s: Pick<ToolSignature, 'server' | 'name' | 'signature' | 'summary'>): string {
  return `${s.server}.${s.name}${s.signature}${s.summary ? ` — ${s.summary}` : ''}`;
}

/** The tool at a detail level: name only, signature and summary, or everything the upstream listed. */
export function describeTool(tool: UpstreamTool, level: DetailLevel): ToolDescription {
  if (level === 'name') return { level, server: tool.server, name: tool.name };
  const signature = renderSignature(tool.inputSchema);
  if (level === 'summary') return { level, server: tool.server, name: tool.name, summary: summarize(tool.description ?? tool.title), signature };
  return {
    level,
    server: tool.server,
    name: tool.name,
    ...(tool.title !== undefined && { title: tool.title }),
    description: tool.description ?? '',
    signature,
    inputSchema: tool.inputSchema,
    ...(tool.outputSchema !== undefined && { outputSchema: tool.outputSchema }),
    ...(tool.annotations !== undefined && { annotations: tool.annotations }),
  };
}
