// Arguments checked against a tool's input schema before the call goes upstream: required
// fields, basic JSON types, enums and unknown keys when the schema forbids them. Deliberately not
// a full JSON Schema validator (the upstream validates too); the sandbox module does the same
// checks (runtime/sdk) so a mistake fails before it leaves the sandbox, this catches the rest.

const MAX_PROBLEMS = 5;

type Schema = Record<string, unknown>;

export function jsonType(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v; // string, boolean, object
}

function matches(v: unknown, type: unknown): boolean {
  if (typeof type !== 'string') return true;
  const t = jsonType(v);
  return t === type || (type === 'number' && t === 'integer');
}

/** Characters of an argument's name quoted in a problem (names come from the sandbox). */
const MAX_QUOTED_NAME = 64;

const quoted = (name: string): string => `"${name.length > MAX_QUOTED_NAME ? `${name.slice(0, MAX_QUOTED_NAME)}…` : name}"`;

/** An enum as the checks use it: its values' JSON, the longest one's length, and how a problem shows it. */
interface EnumTexts {
  texts: ReadonlySet<string>;
  longest: number;
  shown: string;
}

/**
 * Per enum array of a schema, made once (catalogs are never changed in place): an upstream's enum
 * may hold 500,000 values, serialising them took ~20-90 ms per checked argument, and spreading
 * them into Math.max threw (no call of such a tool got past the check).
 */
const enums = new WeakMap<readonly unknown[], EnumTexts>();

function enumTexts(values: readonly unknown[]): EnumTexts {
  let e = enums.get(values);
  if (e === undefined) {
    const texts = new Set<string>();
    let longest = 0;
    for (const value of values) {
      const text = JSON.stringify(value);
      if (text === undefined) continue;
      texts.add(text);
      longest = Math.max(longest, text.length);
    }
    e = { texts, longest, shown: JSON.stringify(values).slice(0, 200) };
    enums.set(values, e);
  }
  return e;
}

/** Whether `v` is one of `values` (JSON equality), serialising `v` once and only if it can match. */
function inEnum(v: unknown, values: readonly unknown[]): boolean {
  const { texts, longest } = enumTexts(values);
  // A string or container longer than every value cannot equal one: no need to serialise it.
  if (typeof v === 'string' && v.length > longest) return false;
  const text = JSON.stringify(v);
  return text !== undefined && text.length <= longest && texts.has(text);
}

/**
 * Problems with `args` for `schema` (empty: fine), each a sentence naming the argument; at most
 * MAX_PROBLEMS, and the work stops there (arguments come from the sandbox: any number of keys).
 */
export function checkArgs(schema: Schema | undefined, args: Record<string, unknown>): string[] {
  if (!schema || typeof schema !== 'object') return [];
  const props = (typeof schema.properties === 'object' && schema.properties !== null ? schema.properties : {}) as Record<string, Schema>;
  const required: unknown[] = Array.isArray(schema.required) ? schema.required : [];
  const problems: string[] = [];
  // The schema is the upstream's (any size), and a refused call counts against no run limit, only
  // the stream's budget of ~1,000 a second: the work stops at MAX_PROBLEMS here too.
  for (const r of required) {
    if (problems.length >= MAX_PROBLEMS) break;
    if (typeof r === 'string' && !(r in args)) problems.push(`missing required argument ${quoted(r)}`);
  }
  for (const k in args) {
    if (problems.length >= MAX_PROBLEMS) break;
    if (!Object.hasOwn(args, k)) continue;
    const v = args[k];
    const p = Object.hasOwn(props, k) ? props[k] : undefined;
    if (p === undefined) {
      if (schema.additionalProperties === false) problems.push(`unknown argument ${quoted(k)} (expected: ${expectedNames(props)})`);
      continue;
    }
    if (typeof p !== 'object' || p === null) continue;
    const types = Array.isArray(p.type) ? p.type : p.type === undefined ? undefined : [p.type];
    if (types && !types.some((t) => matches(v, t))) problems.push(`argument ${quoted(k)} must be ${types.join(' or ')}, not ${jsonType(v)}`);
    else if (Array.isArray(p.enum) && !inEnum(v, p.enum)) problems.push(`argument ${quoted(k)} must be one of ${enumTexts(p.enum).shown}`);
  }
  return problems.slice(0, MAX_PROBLEMS);
}

/** Argument names listed after an unknown one; the rest are "…". */
export const MAX_EXPECTED_NAMES = 20;
/** The list per properties object: listing the keys of 500,000 took ~0.2 s (catalogs are never changed in place). */
const expected = new WeakMap<object, string>();

/** The first MAX_EXPECTED_NAMES names of `props`, or "none". */
function expectedNames(props: Record<string, unknown>): string {
  let names = expected.get(props);
  if (names === undefined) {
    const keys = Object.keys(props);
    names = keys.length === 0 ? 'none' : keys.slice(0, MAX_EXPECTED_NAMES).join(', ') + (keys.length > MAX_EXPECTED_NAMES ? ', …' : '');
    expected.set(props, names);
  }
  return names;
}

/** `name(a: string, b?: integer)`: a tool's arguments in one line, for search and describe. */
export function signature(name: string, schema: Schema | undefined): string {
  const props = (schema && typeof schema.properties === 'object' && schema.properties !== null ? schema.properties : {}) as Record<string, Schema>;
  const required = new Set(Array.isArray(schema?.required) ? (schema.required as unknown[]) : []);
  const params = Object.entries(props).map(([k, p]) => {
    const t = typeof p === 'object' && p !== null ? (Array.isArray(p.type) ? p.type.join('|') : typeof p.type === 'string' ? p.type : 'any') : 'any';
    return `${k}${required.has(k) ? '' : '?'}: ${t}`;
  });
  return `${name}(${params.join(', ')})`;
}
