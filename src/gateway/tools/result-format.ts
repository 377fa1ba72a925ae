// Writing a list of results into a tool reply's text for a model to read. TOON (the reference
// encoder, @toon-format/toon) states a table's keys once and is smaller than JSON for a uniform
// table — and larger on mixed data (published measurements), so it is used only for uniform
// tables: every row an object with the same keys and primitive values. Anything else is compact
// JSON. structuredContent stays JSON whatever the text is.
import { encode } from '@toon-format/toon';
import type { ResultFormat } from '../../config/fields.js';

type Primitive = string | number | boolean | null;

const isPrimitive = (v: unknown): v is Primitive => v === null || ['string', 'number', 'boolean'].includes(typeof v);

/** Pure: rows that TOON writes as one table (at least one row; same keys, primitive values). */
export function isUniformTable(rows: readonly unknown[]): rows is ReadonlyArray<Record<string, Primitive>> {
  if (rows.length === 0) return false;
  let keys: string | undefined;
  for (const row of rows) {
    if (row === null || typeof row !== 'object' || Array.isArray(row)) return false;
    const entries = Object.entries(row);
    if (!entries.every(([, v]) => isPrimitive(v))) return false;
    const k = entries.map(([key]) => key).join('\u0000');
    if (keys !== undefined && k !== keys) return false;
    keys = k;
  }
  return true;
}

/** The text of `rows` in `format`; `text` is the caller's own line format (e.g. one signature per line). */
export function formatRows(rows: readonly unknown[], format: ResultFormat, text: () => string): string {
  if (format === 'text') return text();
  if (format === 'toon' && isUniformTable(rows)) return encode(rows);
  return JSON.stringify(rows);
}
