// Compact text forms of a tool, for an agent's context: a one-line signature rendered from the
// JSON Schema of its arguments, a one-sentence summary, and describe() at three detail levels.
// Pure functions; the schemas come from upstreams, so every input is treated as untrusted shape.
import type { DetailLevel, ToolDescription, ToolSignature, UpstreamTool } from './types.js';

/** Longest summary (characters); the full description is one describe(…, 'full') away. */
export const MAX_SUMMARY_CHARS = 160;
/** Longest signature; beyond it the parameter list ends with `…`. */
export const MAX_SIGNATURE_CHARS = 240;
const MAX_DEPTH = 3;
/** Alternatives of an anyOf or oneOf rendered; the line is cut at MAX_SIGNATURE_CHARS anyway. */
const MAX_ALTERNATIVES = 16;

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
  if (Array.isArray(union) && union.length > 0) {
    // The first alternatives only, as for enums: a line shows a few, and 300,000 took 0.1 s.
    const shown = [...new Set(union.slice(0, MAX_ALTERNATIVES).map((s) => renderType(s, depth + 1)))].join('|');
    return shown + (union.length > MAX_ALTERNATIVES ? '|…' : '');
  }
  const type = schema.type;
  // Each distinct type once, and the schema never copied per type: a list repeating "array" had
  // the items rendered once per entry at every level (48 KB of schema, 3,000 entries on two
  // levels: 9 million renders, a second of the gateway's thread per search hit).
  if (Array.isArray(type)) return [...new Set(type)].map((t) => typeName(schema, t, depth + 1)).join('|');
  return typeName(schema, type, depth);
}

/** The name of one `type` of `schema` (a string, or absent). */
function typeName(schema: Schema, type: unknown, depth: number): string {
  if (depth > MAX_DEPTH) return 'any';
  if (type === 'array') {
    const item = renderType(schema.items, depth + 1);
    return item.includes('|') ? `(${item})[]` : `${item}[]`;
  }
  if (typeof type === 'string') return type;
  return isSchema(schema.properties) ? 'object' : 'any';
}

/**
 * Signatures of the schemas rendered so far. Catalogs are never changed in place (registry.ts), so
 * a schema renders once per listing, not per search hit: listing the keys of one with 500,000
 * properties takes ~0.1 s however few are shown.
 */
const rendered = new WeakMap<object, string>();

/** `(message: string, count?: integer = 1)` from an object schema's properties and required list. */
export function renderSignature(inputSchema: unknown): string {
  if (!isSchema(inputSchema)) return render(inputSchema);
  let s = rendered.get(inputSchema);
  if (s === undefined) rendered.set(inputSchema, (s = render(inputSchema)));
  return s;
}

function render(inputSchema: unknown): string {
  const props = isSchema(inputSchema) && isSchema(inputSchema.properties) ? inputSchema.properties : {};
  const required = isSchema(inputSchema) && Array.isArray(inputSchema.required) ? (inputSchema.required as unknown[]) : [];
  // Required parameters first (in the order `required` names them), then the rest in the
  // upstream's order, rendered only until the line is full: rendering, sorting and listing all of
  // them cost ~0.9 s per search hit for a tool with 500,000.
  const shown = new Set<string>();
  let out = '';
  const add = (name: string, optional: boolean): boolean => {
    const schema = props[name];
    const dflt = isSchema(schema) && 'default' in schema ? ` = ${JSON.stringify(schema.default) ?? 'null'}` : '';
    const next = `${out}${out === '' ? '' : ', '}${name}${optional ? '?' : ''}: ${renderType(schema)}${dflt}`;
    if (next.length > MAX_SIGNATURE_CHARS - 2) return false;
    out = next;
    shown.add(name);
    return true;
  };
  const full = (): string => `(${out}${out === '' ? '' : ', '}…)`;
  for (const name of required) {
    if (typeof name !== 'string' || shown.has(name) || !Object.hasOwn(props, name)) continue;
    if (!add(name, false)) return full();
  }
  for (const name in props) {
    // Every required one is shown already (or the line was full).
    if (!Object.hasOwn(props, name) || shown.has(name)) continue;
    if (!add(name, true)) return full();
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
