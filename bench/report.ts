// The results of one bench run: the JSON document, the table, and the targets from the brief
// printed next to the figures (information, never assertions).
import { mkdir, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { ApiRequestsResult } from './api-requests.js';
import type { PodFloorSample } from './floor.js';
import type { MachineInfo } from './machine.js';
import type { ColdProfile, ExecSplit } from './profile.js';
import type { ProbeResult } from './rss.js';
import { renderTable, type Cell, type Summary } from './stats.js';
import type { ThroughputLevel } from './throughput.js';

export const NO_POOL = 'n/a (no warm pool yet)';
export const NO_SESSIONS = 'n/a (no sessions yet)';

export interface Latency {
  ms: Summary;
  errors: number;
  firstError?: string;
}

/** The same probe run with tsx (as the bench runs) and compiled to plain JavaScript (as deployed). */
export interface RssPair {
  tsx: ProbeResult;
  compiled: ProbeResult;
}

/** Every slot is always present; a figure not measured (yet) is a string saying why. */
export interface Results {
  date: string;
  scale: number;
  machine: MachineInfo;
  rawExecPrint1: Latency | string;
  rawExecTrue: Latency | string;
  rawPodFloor: (Latency & { phasesMs: Record<keyof Omit<PodFloorSample, 'total'>, Summary> }) | string;
  warmTransient: Latency | string;
  session: Latency | string;
  cold: Latency | string;
  throughput: { windowSeconds: number; executeCode: ThroughputLevel[]; rawExec: ThroughputLevel[] } | string;
  apiRequests: ApiRequestsResult | string;
  rss: { finishedRuns: number; seedSeconds: number; heapBytesPerFinishedRun: number; emptyNamespace: RssPair; withFinishedRuns: RssPair } | string;
  rss100Sessions: string;
  profile: { cold?: ColdProfile; execSplit?: ExecSplit };
  ratios: Record<string, number | null>;
}

const ratio = (a: number | undefined, b: number | undefined): number | null =>
  a === undefined || b === undefined || !Number.isFinite(a) || !Number.isFinite(b) || b === 0 ? null : Math.round((a / b) * 100) / 100;
const median = (l: Latency | string | { ms: Summary }): number | undefined => (typeof l === 'string' ? undefined : l.ms.median);
const level = (t: Results['throughput'], kind: 'executeCode' | 'rawExec', c: number): ThroughputLevel | undefined =>
  typeof t === 'string' ? undefined : t[kind].find((l) => l.concurrency === c);

export function computeRatios(r: Results): Record<string, number | null> {
  const rawExec = median(r.rawExecPrint1);
  return {
    warmVsRawExec: ratio(median(r.warmTransient), rawExec),
    sessionVsRawExec: ratio(median(r.session), rawExec),
    coldVsPodFloor: ratio(median(r.cold), median(r.rawPodFloor)),
    throughput16VsRawExec16: ratio(level(r.throughput, 'executeCode', 16)?.runsPerSecond, level(r.throughput, 'rawExec', 16)?.runsPerSecond),
  };
}

const x = (v: number | null | undefined): string => (v === null || v === undefined ? '' : `${v.toFixed(2)}×`);
const meets = (ok: boolean | undefined): string => (ok === undefined ? '' : ok ? 'yes' : 'NO');

function latencyRow(name: string, l: Latency | string, vs?: number | null, target?: string, ok?: boolean): Cell[] {
  if (typeof l === 'string') return notMeasured(name, l, target);
  const err = l.errors ? ` (${l.errors} errors)` : '';
  return [name + err, l.ms.median, l.ms.p95, l.ms.p99, String(l.ms.n), '', x(vs), target ?? '', meets(ok)];
}

/** A slot without a figure keeps its row: the reason goes after the name, the cells say n/a. */
function notMeasured(name: string, why: string, target?: string): Cell[] {
  return [`${name}: ${why}`, 'n/a', '', '', '', '', '', target ?? '', ''];
}

function throughputRows(r: Results): Cell[][] {
  if (typeof r.throughput === 'string') return [notMeasured('throughput', r.throughput, '≥ 0.7× raw exec at c=16')];
  const rows: Cell[][] = [];
  for (const e of r.throughput.executeCode) {
    const raw = level(r.throughput, 'rawExec', e.concurrency);
    const vs = ratio(e.runsPerSecond, raw?.runsPerSecond);
    const at16 = e.concurrency === 16;
    const err = e.errors ? ` (${e.errors} errors)` : '';
    rows.push([`throughput execute_code c=${e.concurrency}${err}`, e.latencyMs.median, e.latencyMs.p95, e.latencyMs.p99, String(e.completed), `${e.runsPerSecond}/s`, x(vs), at16 ? '≥ 0.7× raw exec' : '', at16 ? meets(vs !== null && vs >= 0.7) : '']);
  }
  for (const e of r.throughput.rawExec) {
    const err = e.errors ? ` (${e.errors} errors)` : '';
    rows.push([`throughput raw exec c=${e.concurrency}${err}`, e.latencyMs.median, e.latencyMs.p95, e.latencyMs.p99, String(e.completed), `${e.runsPerSecond}/s`, 'floor', '', '']);
  }
  return rows;
}

export const HEADER = ['figure (latency in ms)', 'median', 'p95', 'p99', 'n', 'rate', 'vs floor', 'target (brief)', 'meets'];

export function tableRows(r: Results): Cell[][] {
  const q = r.ratios;
  const api = r.apiRequests;
  const rss = r.rss;
  // MB as in the target (10^6 bytes); the JSON keeps bytes.
  const mb = (b: number): string => `${(b / 1e6).toFixed(1)} MB`;
  return [
    latencyRow("raw exec python3 -c 'print(1)'", r.rawExecPrint1, undefined, 'floor'),
    latencyRow('raw exec true', r.rawExecTrue),
    latencyRow('raw pod create→Running→exec', r.rawPodFloor, undefined, 'floor'),
    latencyRow('warm transient execute_code', r.warmTransient, q.warmVsRawExec, '≤ 1.0× raw exec', q.warmVsRawExec == null ? undefined : q.warmVsRawExec <= 1),
    latencyRow('session execute_code', r.session, q.sessionVsRawExec, '≤ 0.5× raw exec', q.sessionVsRawExec == null ? undefined : q.sessionVsRawExec <= 0.5),
    latencyRow('cold execute_code (pool off)', r.cold, q.coldVsPodFloor, '≤ 1.3× raw pod', q.coldVsPodFloor == null ? undefined : q.coldVsPodFloor <= 1.3),
    ...throughputRows(r),
    typeof api === 'string'
      ? notMeasured('API writes/run on the hot path', api, '≤ 2 on the hot path')
      : [`API writes/run on the hot path (operator; ${api.operatorWritesPerRun} in all)`, api.criticalPathWritesPerRun, '', '', String(api.runs), '', '', '≤ 2 on the hot path', meets(api.criticalPathWritesPerRun <= 2)],
    typeof api === 'string'
      ? notMeasured('API writes/run seen by the API server', api)
      : [`API writes/run seen by the API server (all clients${api.otherClientsSeen ? ', OTHERS ACTIVE' : ''})`, api.apiserverWritesPerRun, '', '', String(api.runs), '', '', '', ''],
    ...(typeof rss === 'string'
      ? [notMeasured('gateway RSS, 1,000 finished runs', rss, '≤ 200 MB (+100 sessions)')]
      : (['compiled', 'tsx'] as const).map((mode): Cell[] => {
          const full = rss.withFinishedRuns[mode].rss;
          const label = mode === 'compiled' ? 'plain node, as deployed' : 'under tsx';
          return [`gateway RSS, ${rss.finishedRuns} finished runs, ${label} (empty ns: ${mb(rss.emptyNamespace[mode].rss)})`, mb(full), '', '', '1', '', '', '≤ 200 MB (+100 sessions)', mode === 'compiled' ? meets(full <= 200e6) : ''];
        })),
    notMeasured('gateway RSS, 100 live sessions', r.rss100Sessions, '≤ 200 MB (+1,000 runs)'),
  ];
}

export function renderResults(r: Results): string {
  return renderTable(HEADER, tableRows(r));
}

/** Writes bench/results/latest.json and bench/results/<date>.json; returns both paths. */
export async function writeResults(r: Results, table: string): Promise<string[]> {
  const dir = fileURLToPath(new URL('./results/', import.meta.url));
  await mkdir(dir, { recursive: true });
  const body = `${JSON.stringify({ ...r, table: table.split('\n') }, null, 2)}\n`;
  const paths = [`${dir}latest.json`, `${dir}${r.date.replace(/:/g, '-')}.json`];
  for (const p of paths) await writeFile(p, body);
  return paths;
}
