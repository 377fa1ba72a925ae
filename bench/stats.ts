// Percentiles from sorted samples (nearest rank: every reported figure is a real sample) and the
// plain-text table the bench prints.

export interface Summary {
  n: number;
  median: number;
  p95: number;
  p99: number;
  min: number;
  max: number;
  mean: number;
}

/** Nearest-rank percentile of ascending `sorted`; with n < 100 the p99 is the maximum. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1] as number;
}

export function summarize(samples: readonly number[]): Summary {
  const sorted = [...samples].sort((a, b) => a - b);
  const sum = sorted.reduce((a, b) => a + b, 0);
  return {
    n: sorted.length,
    median: percentile(sorted, 50),
    p95: percentile(sorted, 95),
    p99: percentile(sorted, 99),
    min: sorted[0] ?? Number.NaN,
    max: sorted[sorted.length - 1] ?? Number.NaN,
    mean: sorted.length ? sum / sorted.length : Number.NaN,
  };
}

/**
 * Rounds every number of a summary for the JSON file: 0.1 ms is below the noise of most figures,
 * but not of a ~3 ms session call measured against a 0.05× goal, so below 10 ms it keeps 0.01 ms.
 */
export function rounded(s: Summary): Summary {
  const r = (x: number): number => (Math.abs(x) < 10 ? Math.round(x * 100) / 100 : Math.round(x * 10) / 10);
  return { n: s.n, median: r(s.median), p95: r(s.p95), p99: r(s.p99), min: r(s.min), max: r(s.max), mean: r(s.mean) };
}

export type Cell = string | number | undefined;

/** Left-aligned first column, right-aligned numbers, one space-padded line per row. */
export function renderTable(header: readonly string[], rows: readonly Cell[][]): string {
  const text = rows.map((r) => header.map((_, i) => formatCell(r[i])));
  const widths = header.map((h, i) => Math.max(h.length, ...text.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((c, i) => (i === 0 || i === cells.length - 1 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  const rule = widths.map((w) => '-'.repeat(w)).join('  ');
  return [line(header), rule, ...text.map(line)].join('\n');
}

function formatCell(c: Cell): string {
  if (c === undefined) return '';
  if (typeof c === 'string') return c;
  if (!Number.isFinite(c)) return '–';
  if (Math.abs(c) >= 100) return c.toFixed(0);
  if (Math.abs(c) >= 10) return c.toFixed(1);
  return c.toFixed(2);
}

export function ms(x: number): string {
  return Number.isFinite(x) ? `${x >= 100 ? x.toFixed(0) : x.toFixed(1)} ms` : '–';
}
