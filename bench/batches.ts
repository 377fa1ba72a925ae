// Kept apart from context.ts so that bench/rss-probe.ts, which measures a gateway's memory, loads
// no test helper (they import the whole of client-node).

/** `make(0) … make(n - 1)`, `size` at a time (each batch in parallel); the results in order. */
export async function inBatches<T>(n: number, size: number, make: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = [];
  for (let i = 0; i < n; i += size) {
    out.push(...(await Promise.all(Array.from({ length: Math.min(size, n - i) }, (_, j) => make(i + j)))));
  }
  return out;
}

/** The line rss-probe.ts prints its JSON on. */
export const PROBE_PREFIX = 'RSS_PROBE ';
