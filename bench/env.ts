// Bench settings from the environment, read once. BENCH_SCALE scales every repetition count and
// duration (0.1 while developing, 1 for the figures in docs/performance.md); BENCH_ONLY picks
// sections; BENCH_CONCURRENCY overrides the throughput levels.
import { CLUSTER_KUBECONFIG } from '../scripts/cluster-paths.js';

// Like vitest.config.ts: the local test cluster unless KUBECONFIG points elsewhere. Set before
// any KubeConfig is loaded (testKube() reads it lazily).
process.env.KUBECONFIG ??= CLUSTER_KUBECONFIG;

export const SECTIONS = ['floor', 'cold', 'warm', 'session', 'backtoback', 'throughput', 'rss', 'storage', 'hostile', 'codemode', 'plots'] as const;
export type Section = (typeof SECTIONS)[number];

export interface BenchSettings {
  scale: number;
  sections: ReadonlySet<Section>;
  concurrency: readonly number[];
  /** Full-scale counts, before scaling. */
  execSamples: number;
  podSamples: number;
  coldSamples: number;
  warmSamples: number;
  sessionSamples: number;
  throughputSeconds: number;
  finishedRuns: number;
  liveSessions: number;
  hostileSamples: number;
}

function parseScale(raw: string | undefined): number {
  if (raw === undefined || raw === '') return 1;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0 || n > 10)
    throw new Error(`BENCH_SCALE=${raw} is not a number in (0, 10]; use e.g. 0.1 while developing or 1 for published figures.`);
  return n;
}

function parseSections(raw: string | undefined): Set<Section> {
  if (raw === undefined || raw === '') return new Set(SECTIONS);
  const picked = raw.split(',').map((s) => s.trim());
  const bad = picked.filter((s) => !(SECTIONS as readonly string[]).includes(s));
  if (bad.length) throw new Error(`BENCH_ONLY has unknown sections ${bad.join(', ')}; use a comma list of ${SECTIONS.join(', ')}.`);
  return new Set(picked as Section[]);
}

function parseConcurrency(raw: string | undefined): number[] {
  if (raw === undefined || raw === '') return [1, 4, 16, 64];
  const levels = raw.split(',').map(Number);
  if (levels.some((c) => !Number.isInteger(c) || c < 1 || c > 64)) throw new Error(`BENCH_CONCURRENCY=${raw}: use a comma list of integers from 1 to 64.`);
  return levels;
}

export function loadSettings(env: NodeJS.ProcessEnv = process.env): BenchSettings {
  return {
    scale: parseScale(env.BENCH_SCALE),
    sections: parseSections(env.BENCH_ONLY),
    concurrency: parseConcurrency(env.BENCH_CONCURRENCY),
    execSamples: 200,
    podSamples: 40,
    coldSamples: 40,
    warmSamples: 40,
    sessionSamples: 200,
    throughputSeconds: 20,
    finishedRuns: 1000,
    liveSessions: 100,
    hostileSamples: 100,
  };
}

/** A full-scale count scaled down, never below `min` (percentiles of 2 samples mean nothing). */
export function scaled(s: BenchSettings, fullScale: number, min = 3): number {
  return Math.max(min, Math.round(fullScale * s.scale));
}
