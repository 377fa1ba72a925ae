// Large tool results are cut structurally (issue 11): the program still gets valid JSON of the
// same shape — every key of an object kept (small values whole, big ones shortened), arrays
// shortened to a prefix, strings to a prefix — and one sentence saying what was cut.
//
// Cost: linear in the input. One pass (iterative, so no nesting depth can overflow the stack)
// learns the JSON byte size of every array and object (and remembers those of the large ones);
// the cut then only adds and subtracts those sizes, never serialising again. It descends into a
// container only when it does not fit, reads a string no further than its budget, and sorts the
// keys of the objects it descends into: O(n + k log k) for n nodes and string bytes and k keys. Results upstream may nest deeper than
// anything can use (and deeper than JSON.stringify survives), so anything below MAX_DEPTH levels
// is emptied, even in a result that fits. The result's JSON never exceeds the limit (unless the
// limit is under 2 bytes or the whole result is one number longer than it).

/** Values nested deeper than this many levels are emptied ([] or {}). */
export const MAX_DEPTH = 64;

export interface CutResult {
  value: unknown;
  /** Set when something was cut: what, in one sentence. */
  cut?: string;
}

/** Counts the work a cut does (nodes visited, string units read, keys compared): for tests. */
export interface CutWork {
  units: number;
}

type Container = unknown[] | Record<string, unknown>;

interface Stats {
  itemsDropped: number;
  stringsCut: number;
  stringsEmptied: number;
  keysDropped: number;
  emptied: number;
}

interface Ctx {
  /** JSON bytes of the input's containers (the large and the too deep ones), filled by measure(). */
  sizes: Map<object, number>;
  /** Containers holding something nested deeper than MAX_DEPTH. */
  tooDeep: Set<object>;
  stats: Stats;
  work: CutWork;
}

/** A value and the bytes of its JSON. */
interface Fitted {
  value: unknown;
  bytes: number;
}

export function jsonBytes(v: unknown): number {
  return Buffer.byteLength(JSON.stringify(v) ?? 'null');
}

/** `value` cut so that its JSON takes at most `maxBytes` bytes, and nests at most MAX_DEPTH levels. */
export function cutToBytes(value: unknown, maxBytes: number, work: CutWork = { units: 0 }): CutResult {
  const ctx: Ctx = { sizes: new Map(), tooDeep: new Set(), stats: { itemsDropped: 0, stringsCut: 0, stringsEmptied: 0, keysDropped: 0, emptied: 0 }, work };
  const before = measure(value, ctx);
  if (before <= maxBytes && !(isContainer(value) && ctx.tooDeep.has(value))) return { value };
  const cut = fit(value, before, maxBytes, 0, ctx);
  const { stats } = ctx;
  const parts = [
    stats.itemsDropped > 0 && `${stats.itemsDropped} array items dropped from the ends of arrays`,
    stats.stringsCut > 0 && `${stats.stringsCut} strings shortened (ending in "…")`,
    stats.stringsEmptied > 0 && `${stats.stringsEmptied} strings emptied (no room for "…")`,
    stats.keysDropped > 0 && `${stats.keysDropped} object keys dropped`,
    stats.emptied > 0 && `${stats.emptied} values nested deeper than ${MAX_DEPTH} levels emptied`,
  ].filter(Boolean);
  return { value: cut.value, cut: `result cut from ${before} to ${cut.bytes} bytes (limit ${maxBytes}): ${parts.join(', ')}` };
}

function isContainer(v: unknown): v is Container {
  // An object with toJSON (a Date) is written as whatever toJSON returns: a leaf here.
  return typeof v === 'object' && v !== null && (Array.isArray(v) || typeof (v as { toJSON?: unknown }).toJSON !== 'function');
}

/** JSON leaves these out of objects (and writes null for them in arrays). */
function isOmitted(v: unknown): boolean {
  return v === undefined || typeof v === 'function' || typeof v === 'symbol';
}

function stringBytes(s: string, work: CutWork): number {
  work.units += s.length;
  if (s.length > 32) return Buffer.byteLength(JSON.stringify(s));
  // Short strings (keys, ids) are counted here: cheaper than serialising them.
  let n = 2;
  for (let i = 0; i < s.length;) {
    const size = charBytesAt(s, i);
    n += size;
    i += size === 4 ? 2 : 1;
  }
  return n;
}

/** JSON bytes of anything but an array or a plain object. */
function leafBytes(v: unknown, work: CutWork): number {
  if (typeof v === 'string') return stringBytes(v, work);
  work.units++;
  if (typeof v === 'number') return Number.isFinite(v) ? String(v).length : 4;
  if (typeof v === 'boolean') return v ? 4 : 5;
  return jsonBytes(v); // null, undefined (null in an array), toJSON objects
}

/** A container being measured: its children are read one at a time, from `next`. */
interface Frame {
  node: Container;
  keys: string[] | undefined;
  next: number;
  written: number;
  bytes: number;
  depth: number;
  deep: boolean;
}

/**
 * Containers smaller than this are not remembered (a result of tiny arrays would otherwise fill
 * a Map with millions of them): asked again, their size is counted again, which costs less than
 * this many bytes each time and happens once per container the cut descends into.
 */
const REMEMBER_BYTES = 64;

/** JSON bytes of `root` (at nesting level `depth`); records the size of every large or too deep container. */
function measure(root: unknown, ctx: Ctx, depth = 0): number {
  if (!isContainer(root)) return leafBytes(root, ctx.work);
  const { sizes, work } = ctx;
  // Only a cycle nests deeper than MAX_DEPTH and meets itself: keep that part of the path.
  const deepPath = new Set<object>();
  const frame = (node: Container, depth: number): Frame => {
    work.units++;
    if (depth > MAX_DEPTH) {
      if (deepPath.has(node)) throw new TypeError('Converting circular structure to JSON');
      deepPath.add(node);
    }
    return { node, keys: Array.isArray(node) ? undefined : Object.keys(node), next: 0, written: 0, bytes: 2, depth, deep: false };
  };
  const stack = [frame(root, depth)];
  for (;;) {
    const f = stack[stack.length - 1]!;
    const child = nextChild(f, ctx);
    if (child !== undefined) {
      const known = sizes.get(child);
      if (known === undefined) stack.push(frame(child, f.depth + 1));
      else {
        f.bytes += known; // the same object twice: JSON writes it twice
        f.deep ||= ctx.tooDeep.has(child);
      }
      continue;
    }
    stack.pop();
    deepPath.delete(f.node);
    const deep = f.deep || (f.depth >= MAX_DEPTH && f.written > 0);
    if (deep) ctx.tooDeep.add(f.node);
    if (deep || f.bytes >= REMEMBER_BYTES) sizes.set(f.node, f.bytes);
    const parent = stack[stack.length - 1];
    if (parent === undefined) return f.bytes;
    parent.bytes += f.bytes;
    parent.deep ||= deep;
  }
}

/** Adds f's next leaves to f.bytes and returns its next container child, or undefined at its end. */
function nextChild(f: Frame, ctx: Ctx): Container | undefined {
  const { node, keys } = f;
  const n = keys === undefined ? (node as unknown[]).length : keys.length;
  while (f.next < n) {
    const i = f.next++;
    const v = keys === undefined ? (node as unknown[])[i] : (node as Record<string, unknown>)[keys[i]!];
    if (keys !== undefined && isOmitted(v)) continue;
    f.bytes += (f.written++ > 0 ? 1 : 0) + (keys === undefined ? 0 : stringBytes(keys[i]!, ctx.work) + 1);
    if (isContainer(v)) return v;
    f.bytes += leafBytes(v, ctx.work);
  }
  return undefined;
}

/** JSON bytes of `v`, a child of a container the cut descends into, at nesting level `depth`. */
function sizeOf(v: unknown, depth: number, ctx: Ctx): number {
  return (isContainer(v) && ctx.sizes.get(v)) || measure(v, ctx, depth);
}

/** `v` (of `bytes` bytes) cut to `budget` bytes at most, if it can be; `depth`: its nesting level. */
function fit(v: unknown, bytes: number, budget: number, depth: number, ctx: Ctx): Fitted {
  ctx.work.units++;
  if (isContainer(v)) {
    if (bytes <= budget && !ctx.tooDeep.has(v)) return { value: v, bytes };
    if (depth >= MAX_DEPTH) {
      ctx.stats.emptied++;
      return { value: Array.isArray(v) ? [] : {}, bytes: 2 };
    }
    return Array.isArray(v) ? fitArray(v, budget, depth, ctx) : fitObject(v, budget, depth, ctx);
  }
  if (bytes <= budget) return { value: v, bytes };
  if (typeof v === 'string') return fitString(v, budget, ctx);
  return { value: v, bytes }; // numbers, booleans, null: a few bytes, kept (or dropped by the caller)
}

/** The longest prefix of `s` that fits `budget` with "…" after it, or "" when not even "…" fits. */
function fitString(s: string, budget: number, ctx: Ctx): Fitted {
  const room = budget - 2 - 3; // the quotes, and the ellipsis (3 bytes of UTF-8)
  if (room < 0) {
    ctx.stats.stringsEmptied++;
    return { value: '', bytes: 2 };
  }
  ctx.stats.stringsCut++;
  let i = 0;
  let used = 0;
  while (i < s.length) {
    const size = charBytesAt(s, i);
    if (used + size > room) break; // never half a surrogate pair
    used += size;
    i += size === 4 ? 2 : 1;
  }
  ctx.work.units += i;
  return { value: s.slice(0, i) + '…', bytes: used + 5 };
}

/**
 * Bytes the character at s[i] takes inside a JSON string, as JSON.stringify writes it: 4 for a
 * surrogate pair (two units), never 4 for one unit.
 */
function charBytesAt(s: string, i: number): number {
  const c = s.charCodeAt(i);
  if (c === 0x22 || c === 0x5c) return 2; // \" \\
  if (c < 0x20) return c === 0x08 || c === 0x09 || c === 0x0a || c === 0x0c || c === 0x0d ? 2 : 6; // \n, \u0001
  if (c < 0x80) return 1;
  if (c < 0x800) return 2;
  if (c < 0xd800 || c > 0xdfff) return 3;
  const next = s.charCodeAt(i + 1);
  return c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff ? 4 : 6; // a pair, or a lone surrogate written \ud800
}

function fitArray(a: unknown[], budget: number, depth: number, ctx: Ctx): Fitted {
  const out: unknown[] = [];
  let used = 2; // []
  for (const item of a) {
    const comma = out.length > 0 ? 1 : 0;
    const room = budget - used - comma;
    if (room < 2) break;
    const kept = fit(item, sizeOf(item, depth + 1, ctx), room, depth + 1, ctx);
    if (kept.bytes > room) break;
    out.push(kept.value);
    used += kept.bytes + comma;
  }
  ctx.stats.itemsDropped += a.length - out.length;
  return { value: out, bytes: used };
}

interface Entry {
  key: string;
  value: unknown;
  bytes: number;
  /** Bytes of `"key":`. */
  keyBytes: number;
  /** Bytes of the smallest value of the same JSON type: "", [], {}, or the number itself. */
  minBytes: number;
  kept?: unknown;
}

function fitObject(o: Record<string, unknown>, budget: number, depth: number, ctx: Ctx): Fitted {
  // Keys go (from the end) only when even empty values do not fit: keep the longest prefix of
  // keys that fits with empty values, and read no further.
  const keys = Object.keys(o);
  const entries: Entry[] = [];
  let minimal = 2; // {}
  let i = 0;
  for (; i < keys.length; i++) {
    const key = keys[i]!;
    const value = o[key];
    if (isOmitted(value)) continue;
    const bytes = sizeOf(value, depth + 1, ctx);
    const minBytes = typeof value === 'string' || isContainer(value) ? 2 : bytes;
    const keyBytes = stringBytes(key, ctx.work) + 1;
    const cost = (entries.length > 0 ? 1 : 0) + keyBytes + minBytes;
    if (minimal + cost > budget) break;
    minimal += cost;
    entries.push({ key, value, bytes, keyBytes, minBytes });
  }
  ctx.stats.keysDropped += keys.length - i;
  // Small values first, whole: a cursor or a count next to a huge list survives the cut.
  let extra = budget - minimal;
  const bySize = [...entries].sort((a, b) => {
    ctx.work.units++;
    return a.bytes - b.bytes;
  });
  for (const e of bySize) {
    const kept = fit(e.value, e.bytes, e.minBytes + extra, depth + 1, ctx);
    e.kept = kept.value;
    extra -= kept.bytes - e.minBytes;
  }
  // fromEntries, not assignment: a "__proto__" key stays a key.
  return { value: Object.fromEntries(entries.map((e) => [e.key, e.kept])), bytes: budget - extra };
}
