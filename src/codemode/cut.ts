// Large tool results are cut structurally (issue 11): the program still gets valid JSON of the
// same shape — every key of an object kept (small values whole, big ones shortened), arrays
// shortened to a prefix, strings to a prefix — and one sentence saying what was cut.

export interface CutResult {
  value: unknown;
  /** Set when something was cut: what, in one sentence. */
  cut?: string;
}

interface Stats {
  itemsDropped: number;
  stringsCut: number;
  keysDropped: number;
}

export function jsonBytes(v: unknown): number {
  return Buffer.byteLength(JSON.stringify(v) ?? 'null');
}

/** `value` cut so that its JSON takes at most `maxBytes` bytes (best effort below ~16 bytes). */
export function cutToBytes(value: unknown, maxBytes: number): CutResult {
  const before = jsonBytes(value);
  if (before <= maxBytes) return { value };
  const stats: Stats = { itemsDropped: 0, stringsCut: 0, keysDropped: 0 };
  const cut = fit(value, maxBytes, stats);
  const parts = [
    stats.itemsDropped > 0 && `${stats.itemsDropped} array items dropped from the ends of arrays`,
    stats.stringsCut > 0 && `${stats.stringsCut} strings shortened (ending in "…")`,
    stats.keysDropped > 0 && `${stats.keysDropped} object keys dropped`,
  ].filter(Boolean);
  return { value: cut, cut: `result cut from ${before} to ${jsonBytes(cut)} bytes (limit ${maxBytes}): ${parts.join(', ')}` };
}

function fit(v: unknown, budget: number, stats: Stats): unknown {
  if (jsonBytes(v) <= budget) return v;
  if (typeof v === 'string') return fitString(v, budget, stats);
  if (Array.isArray(v)) return fitArray(v, budget, stats);
  if (typeof v === 'object' && v !== null) return fitObject(v as Record<string, unknown>, budget, stats);
  return v; // numbers, booleans, null: a few bytes, kept
}

function fitString(s: string, budget: number, stats: Stats): string {
  stats.stringsCut++;
  // Binary search for the longest prefix whose JSON (with the ellipsis) fits.
  let lo = 0;
  let hi = s.length;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (jsonBytes(prefix(s, mid) + '…') <= budget) lo = mid;
    else hi = mid - 1;
  }
  return prefix(s, lo) + '…';
}

/** The first n UTF-16 units, never ending in half a surrogate pair. */
function prefix(s: string, n: number): string {
  const c = s.charCodeAt(n - 1);
  return s.slice(0, c >= 0xd800 && c <= 0xdbff ? n - 1 : n);
}

function fitArray(a: unknown[], budget: number, stats: Stats): unknown[] {
  const out: unknown[] = [];
  let used = 2; // []
  for (const item of a) {
    const room = budget - used - (out.length > 0 ? 1 : 0);
    if (room < 2) break;
    const kept = fit(item, room, stats);
    const size = jsonBytes(kept);
    if (size > room) break;
    out.push(kept);
    used += size + (out.length > 1 ? 1 : 0);
  }
  stats.itemsDropped += a.length - out.length;
  return out;
}

/** The smallest value of the same JSON type. */
function placeholder(v: unknown): unknown {
  if (typeof v === 'string') return '';
  if (Array.isArray(v)) return [];
  if (typeof v === 'object' && v !== null) return {};
  return v;
}

function fitObject(o: Record<string, unknown>, budget: number, stats: Stats): Record<string, unknown> {
  let keys = Object.keys(o);
  const minimal = (ks: string[]): number => jsonBytes(Object.fromEntries(ks.map((k) => [k, placeholder(o[k])])));
  // Keys go (from the end) only when even empty values do not fit.
  while (keys.length > 0 && minimal(keys) > budget) {
    keys = keys.slice(0, -1);
    stats.keysDropped++;
  }
  // Small values first, whole: a cursor or a count next to a huge list survives the cut.
  let extra = budget - minimal(keys);
  const chosen = new Map<string, unknown>();
  const size = new Map(keys.map((k) => [k, jsonBytes(o[k])]));
  for (const k of [...keys].sort((a, b) => (size.get(a) ?? 0) - (size.get(b) ?? 0))) {
    const base = jsonBytes(placeholder(o[k]));
    const kept = fit(o[k], base + extra, stats);
    chosen.set(k, kept);
    extra -= jsonBytes(kept) - base;
  }
  return Object.fromEntries(keys.map((k) => [k, chosen.get(k)]));
}
