// The part of a tool's input schema the SDK client reads on every call to a 2026-era upstream: it
// mirrors arguments into `Mcp-Param-*` headers from the `x-mcp-header` declarations of the tool
// definition it is given (SEP-2243), and walks that definition's whole schema for them on each
// call, copying the property path at every node. An upstream may list a schema of megabytes (a
// chain of 2,000 `properties` over 300,000 leaves, 3.8 MB: 1.4 s of the gateway's thread per call),
// so the connection gives it this instead: the same declarations, and whatever would make the
// SDK refuse them, without the rest. Made once per listed schema.

/** The SDK's annotation key (x-mcp-header) and the keywords its scan descends into besides `properties`. */
const HEADER_KEY = 'x-mcp-header';
const SUBSCHEMA_KEYWORDS = [
  'items',
  'prefixItems',
  'contains',
  'additionalProperties',
  'unevaluatedProperties',
  'unevaluatedItems',
  'propertyNames',
  'patternProperties',
  'dependentSchemas',
  'oneOf',
  'anyOf',
  'allOf',
  'not',
  'if',
  'then',
  'else',
  '$defs',
  'definitions',
] as const;
/** Of those, the ones whose value maps names to subschemas. */
const NAMED_SUBSCHEMAS = new Set<string>(['patternProperties', 'dependentSchemas', '$defs', 'definitions']);
/** Deeper declarations are not mirrored (no schema nests this deep; the SDK's own walk is recursive). */
export const MAX_HEADER_SCHEMA_DEPTH = 256;

type Schema = Record<string, unknown>;

const kept = new WeakMap<object, Schema>();

/**
 * What the SDK reads of `inputSchema` to mirror arguments into headers: every `x-mcp-header`
 * (with its `type`) and the keywords on the way to it, nothing else; `{ type: 'object' }` when
 * the schema declares none. Kept per schema object (catalogs are never changed in place).
 */
export function headerSchema(inputSchema: unknown): Schema {
  if (typeof inputSchema !== 'object' || inputSchema === null) return { type: 'object' };
  let s = kept.get(inputSchema);
  if (s === undefined) kept.set(inputSchema, (s = (prune(inputSchema, 0) as Schema | undefined) ?? { type: 'object' }));
  return s;
}

/** `node` reduced to its declarations and the way to them, or undefined when it holds none. */
function prune(node: unknown, depth: number): unknown {
  if (typeof node !== 'object' || node === null || depth > MAX_HEADER_SCHEMA_DEPTH) return undefined;
  const schema = node as Schema;
  const out: Array<[string, unknown]> = [];
  if (HEADER_KEY in schema) out.push([HEADER_KEY, schema[HEADER_KEY]], ...('type' in schema ? [['type', schema.type] as [string, unknown]] : []));
  const properties = schema.properties;
  if (typeof properties === 'object' && properties !== null) {
    const p = named(properties as Schema, depth);
    if (p) out.push(['properties', p]);
  }
  for (const k of SUBSCHEMA_KEYWORDS) {
    const sub = schema[k];
    if (sub === undefined) continue;
    let p: unknown;
    if (Array.isArray(sub)) {
      const branches = sub.map((b) => prune(b, depth + 1)).filter((b) => b !== undefined);
      p = branches.length > 0 ? branches : undefined;
    } else if (typeof sub === 'object' && sub !== null && NAMED_SUBSCHEMAS.has(k)) p = named(sub as Schema, depth);
    else p = prune(sub, depth + 1);
    if (p !== undefined) out.push([k, p]);
  }
  // fromEntries: a "__proto__" property name stays a key, as the SDK reads it from the listing.
  return out.length > 0 ? Object.fromEntries(out) : undefined;
}

/** A name → subschema map reduced to the names whose subschema holds a declaration. */
function named(map: Schema, depth: number): Schema | undefined {
  const out: Array<[string, unknown]> = [];
  for (const [name, child] of Object.entries(map)) {
    const p = prune(child, depth + 1);
    if (p !== undefined) out.push([name, p]);
  }
  return out.length > 0 ? Object.fromEntries(out) : undefined;
}
