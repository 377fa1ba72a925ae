// Kubernetes quantities as numbers, to compare a run's requested limits with the admin's bounds
// without a round trip to the API server. Only the suffixes QUANTITY_PATTERN accepts.
import { QUANTITY_PATTERN } from '../api/v1alpha1/index.js';

const MULTIPLIERS: Readonly<Record<string, number>> = {
  '': 1,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
};

/**
 * `'500m'` → 0.5 (cores), `'512Mi'` → 536870912 (bytes), `'2'` → 2.
 * Throws on anything QUANTITY_PATTERN rejects, so a bad string cannot compare as NaN.
 */
export function parseQuantity(q: string): number {
  const match = QUANTITY_PATTERN.exec(q);
  if (!match) {
    throw new Error(`Invalid quantity "${q}": expected a number with an optional suffix m, k, Ki, Mi, Gi, Ti, M, G or T (e.g. 500m, 1, 512Mi)`);
  }
  const suffix = match[3] ?? '';
  const multiplier = MULTIPLIERS[suffix] ?? 1;
  return Number(match[1]) * multiplier;
}
