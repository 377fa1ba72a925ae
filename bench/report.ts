// The results of one bench run: the JSON document, the table, and the targets from the brief
// printed next to the figures (information, never assertions).
import { mkdir, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { ApiFloor } from './api-floor.js';
import type { ApiRequestsResult } from './api-requests.js';
import type { PodFloorSample } from './floor.js';
import type { MachineInfo } from './machine.js';
import type { ColdKernelSplit, ExecSplit, KernelSplit, PhaseProfile } from './profile.js';
import type { BackToBack } from './back-to-back.js';
import type { CodeModeResult } from './codemode.js';
import type { PlotsResult } from './plots.js';
import type { HostileResult } from './hostile.js';
import type { ProbeResult } from './rss.js';
import type { StorageRow } from './storage.js';
import { renderTable, type Cell, type Summary } from './stats.js';
import type { ThroughputLevel } from './throughput.js';

/** A session row's extras: create_session's time and its unrecorded warm-up calls (bench/warm.ts). */
export interface SessionExtras {
  createMs: number;
  /** Calls made before the recorded ones (older results: absent, 3). */
  warmupCalls?: number;
  /** The first of those calls: a fresh gateway's and client's (V8 not yet warm). */
  firstCallsMs?: Summary;
}

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

/** Every slot is always present; a figure not measured is a string saying why. */
export interface Results {
  date: string;
  scale: number;
  machine: MachineInfo;
  rawExecPrint1: Latency | string;
  rawExecTrue: Latency | string;
  rawPodFloor: (Latency & { phasesMs: Record<keyof Omit<PodFloorSample, 'total'>, Summary> }) | string;
  /** Warm calls made as soon as the pool had refilled (the previous call's after-work still on the node). */
  warmTransient: (Latency & { coldFallbacks: number; streamWaitTimeouts?: number }) | string;
  /** Warm calls made REST_MS after the pool had refilled (bench/warm.ts). */
  warmAtRest?: (Latency & { coldFallbacks: number; streamWaitTimeouts?: number; restMs: number }) | string;
  /** The at-rest warm calls against a gateway in a process of its own, as deployed. */
  warmAtRestDeployed?: (Latency & { coldFallbacks: number; restMs: number; memoryLimit?: string }) | string;
  session: (Latency & SessionExtras) | string;
  /** The same session calls against a gateway in a process of its own, as deployed (the client is not on its event loop). */
  sessionDeployed?: (Latency & SessionExtras & { memoryLimit?: string }) | string;
  cold: Latency | string;
  throughput: { windowSeconds: number; executeCode: ThroughputLevel[]; rawExec: ThroughputLevel[]; session?: ThroughputLevel[] | string } | string;
  apiRequests: { cold: ApiRequestsResult | string; warm: ApiRequestsResult | string };
  rss: { finishedRuns: number; seedSeconds: number; heapBytesPerFinishedRun: number; emptyNamespace: RssPair; withFinishedRuns: RssPair } | string;
  rss100Sessions: (ProbeResult & { finishedRuns: number; openSeconds: number }) | string;
  /** A benign client's session calls, quiet and under a hostile neighbour. */
  hostile: HostileResult | string;
  /** Gateway RSS after a restart with large finished runs (bench/storage.ts). */
  storage: StorageRow[] | string;
  /** Back-to-back warm calls with the default, demand-sized pool. */
  backToBack: BackToBack | string;
  /** Nested tool calls from sandbox code against the same call from the gateway (bench/codemode.ts). */
  codeMode: CodeModeResult | string;
  /** A Matplotlib figure's round trip as image content against print(1) in a session (bench/plots.ts). */
  plots: PlotsResult | string;
  profile: {
    cold?: PhaseProfile;
    warm?: PhaseProfile;
    /** The kernel part of warm calls ("claim done → MCP reply"), from the relay stream's frames. */
    warmKernel?: KernelSplit;
    /** The same for the at-rest warm batch (each call 2.5 s after the refill). */
    warmAtRest?: PhaseProfile;
    warmAtRestKernel?: KernelSplit;
    coldKernel?: ColdKernelSplit;
    /** Round trips of the operator's calls over the whole batch, post-reply ones included. */
    coldApiRoundTripsMs?: Record<string, Summary>;
    warmApiRoundTripsMs?: Record<string, Summary>;
    /** Runs of the cold batch whose pod the operator created twice (the run executed twice). */
    coldRunsExecutedTwice?: number;
    /**
     * Each cold call minus the floor call made just before it at the same relist phase (bench/
     * relist-phase.ts), ms: the operator's own cost, without most of the relist wait's spread.
     * Undefined when the rows were measured apart or a call of either failed (the pairs would not line up).
     */
    coldMinusFloorPairedMs?: Summary;
    /** Runs of the warm batch that claimed two pool pods (the run executed twice). */
    warmRunsExecutedTwice?: number;
    execSplit?: ExecSplit;
    mcpRoundTripMs?: Summary;
    apiRequest?: ApiFloor;
  };
  ratios: Record<string, number | null>;
}

/**
 * a ÷ b to three significant digits: a goal is judged on this figure, and two decimals would call
 * 0.054× "0.05×" and meet a ≤ 0.05× goal.
 */
const ratio = (a: number | undefined, b: number | undefined): number | null =>
  a === undefined || b === undefined || !Number.isFinite(a) || !Number.isFinite(b) || b === 0 ? null : Number((a / b).toPrecision(3));
const median = (l: Latency | string): number | undefined => (typeof l === 'string' ? undefined : l.ms.median);
const level = (t: Results['throughput'], kind: 'executeCode' | 'rawExec' | 'session', c: number): ThroughputLevel | undefined => {
  const levels = typeof t === 'string' ? undefined : t[kind];
  return typeof levels === 'string' ? undefined : levels?.find((l) => l.concurrency === c);
};

/**
 * The cold row against the pod floor. Measured in pairs (a floor call and a cold call at the same
 * phase of the kubelet's relist, bench/relist-phase.ts), it is the floor's median plus the median
 * of the pairs' differences, over the floor's median: the ratio of the two medians swings by ±0.05
 * between runs, because each median falls wherever the relist wait (spread over a second) puts it.
 */
export function coldVsPodFloor(r: Pick<Results, 'cold' | 'rawPodFloor' | 'profile'>): number | null {
  const floor = median(r.rawPodFloor);
  const paired = r.profile.coldMinusFloorPairedMs;
  if (paired && floor !== undefined) return ratio(floor + paired.median, floor);
  return ratio(median(r.cold), floor);
}

export function computeRatios(r: Results): Record<string, number | null> {
  const rawExec = median(r.rawExecPrint1);
  return {
    warmVsRawExec: ratio(median(r.warmTransient), rawExec),
    warmAtRestVsRawExec: r.warmAtRest === undefined ? null : ratio(median(r.warmAtRest), rawExec),
    warmAtRestDeployedVsRawExec: r.warmAtRestDeployed === undefined ? null : ratio(median(r.warmAtRestDeployed), rawExec),
    sessionVsRawExec: ratio(median(r.session), rawExec),
    sessionDeployedVsRawExec: r.sessionDeployed === undefined ? null : ratio(median(r.sessionDeployed), rawExec),
    coldVsPodFloor: coldVsPodFloor(r),
    throughput16VsRawExec16: ratio(level(r.throughput, 'executeCode', 16)?.runsPerSecond, level(r.throughput, 'rawExec', 16)?.runsPerSecond),
    sessionThroughput16VsRawExec16: ratio(level(r.throughput, 'session', 16)?.runsPerSecond, level(r.throughput, 'rawExec', 16)?.runsPerSecond),
    nestedCallVsDirect: typeof r.codeMode === 'string' ? null : ratio(r.codeMode.nested.ms.median, r.codeMode.direct.ms.median),
  };
}

const x = (v: number | null | undefined): string => (v === null || v === undefined ? '' : `${Number(v.toPrecision(3))}×`);
const meets = (ok: boolean | undefined): string => (ok === undefined ? '' : ok ? 'yes' : 'NO');
const atMost = (v: number | null | undefined, limit: number): boolean | undefined => (v === null || v === undefined ? undefined : v <= limit);

/** A slot without a figure keeps its row: the reason goes after the name, the cells say n/a. */
function notMeasured(name: string, why: string, target?: string): Cell[] {
  return [`${name}: ${why}`, 'n/a', '', '', '', '', '', target ?? '', ''];
}

function latencyRow(name: string, l: Latency | string, vs?: number | null, target?: string, ok?: boolean): Cell[] {
  if (typeof l === 'string') return notMeasured(name, l, target);
  const err = l.errors ? ` (${l.errors} errors)` : '';
  return [name + err, l.ms.median, l.ms.p95, l.ms.p99, String(l.ms.n), '', x(vs), target ?? '', meets(ok)];
}

function throughputRows(r: Results): Cell[][] {
  if (typeof r.throughput === 'string') return [notMeasured('throughput', r.throughput, '≥ 0.7× raw exec at c=16')];
  const rows: Cell[][] = [];
  const row = (name: string, e: ThroughputLevel, vs: string, target = '', ok = ''): Cell[] => {
    const err = e.errors ? ` (${e.errors} errors)` : '';
    return [
      `${name} c=${e.concurrency}${err}`,
      e.latencyMs.median,
      e.latencyMs.p95,
      e.latencyMs.p99,
      String(e.completed),
      `${e.runsPerSecond}/s`,
      vs,
      target,
      ok,
    ];
  };
  for (const e of r.throughput.executeCode) {
    const vs = ratio(e.runsPerSecond, level(r.throughput, 'rawExec', e.concurrency)?.runsPerSecond);
    const at16 = e.concurrency === 16;
    rows.push(row('throughput cold execute_code', e, x(vs), at16 ? '≥ 0.7× raw exec' : '', at16 ? meets(vs !== null && vs >= 0.7) : ''));
  }
  const sessions = r.throughput.session;
  if (typeof sessions === 'string') rows.push(notMeasured('throughput session execute_code', sessions));
  for (const e of typeof sessions === 'string' ? [] : (sessions ?? [])) {
    rows.push(
      row('throughput session execute_code (a session per client)', e, x(ratio(e.runsPerSecond, level(r.throughput, 'rawExec', e.concurrency)?.runsPerSecond))),
    );
  }
  for (const e of r.throughput.rawExec) rows.push(row('throughput raw exec', e, 'floor'));
  return rows;
}

function apiRow(mode: 'cold' | 'warm', api: ApiRequestsResult | string): Cell[][] {
  const name = `API writes/run on the hot path, ${mode}`;
  if (typeof api === 'string') return [notMeasured(name, api, '≤ 2 on the hot path')];
  const measured = api.measuredBeforeReply;
  return [
    [
      `${name} (by the code; operator ${api.operatorWritesPerRun} in all)`,
      api.criticalPathWritesPerRun,
      '',
      '',
      String(api.runs),
      '',
      '',
      '≤ 2 on the hot path',
      meets(api.criticalPathWritesPerRun <= 2),
    ],
    ...(measured && measured.calls > 0
      ? [
          [
            `API writes/run done before the reply, ${mode} (measured per call; upper bound)`,
            measured.perCall.median,
            measured.perCall.p95,
            measured.perCall.p99,
            String(measured.calls),
            '',
            '',
            '',
            '',
          ] as Cell[],
        ]
      : []),
    [
      `API writes/run seen by the API server, ${mode} (all clients${api.otherClientsSeen ? ', OTHERS ACTIVE' : ''})`,
      api.apiserverWritesPerRun,
      '',
      '',
      String(api.runs),
      '',
      '',
      '',
      '',
    ],
  ];
}

/** How a gateway process ran: under the chart's memory limit (as deployed) or, where no cgroup could be made, without. */
function deployedAs(memoryLimit: string | undefined): string {
  return memoryLimit ? `as deployed (${memoryLimit} limit)` : 'NO memory limit (not as deployed)';
}

function rssRows(r: Results): Cell[][] {
  const rss = r.rss;
  const target = '≤ 150 MB (+100 sessions)';
  if (typeof rss === 'string') return [notMeasured('gateway RSS, 1,000 finished runs', rss, target)];
  // MB as in the target (10^6 bytes); the JSON keeps bytes.
  const mb = (b: number): string => `${(b / 1e6).toFixed(1)} MB`;
  return (['compiled', 'tsx'] as const).map((mode): Cell[] => {
    const full = rss.withFinishedRuns[mode].rss;
    const label = mode === 'compiled' ? `plain node, ${deployedAs(rss.withFinishedRuns.compiled.memoryLimit)}` : 'under tsx, no memory limit';
    return [
      `gateway RSS, ${rss.finishedRuns} finished runs, ${label} (empty ns: ${mb(rss.emptyNamespace[mode].rss)})`,
      mb(full),
      '',
      '',
      '1',
      '',
      '',
      target,
      mode === 'compiled' ? meets(full <= 150e6) : '',
    ];
  });
}

function rssSessionsRow(live: Results['rss100Sessions']): Cell[] {
  const target = '≤ 150 MB (+1,000 runs)';
  if (typeof live === 'string') return notMeasured('gateway RSS, 100 live sessions', live, target);
  return [
    `gateway RSS, ${live.sessions} live sessions + ${live.finishedRuns} finished runs, plain node, ${deployedAs(live.memoryLimit)}`,
    `${(live.rss / 1e6).toFixed(1)} MB`,
    '',
    '',
    '1',
    '',
    '',
    target,
    meets(live.rss <= 150e6),
  ];
}

function hostileRows(h: Results['hostile']): Cell[][] {
  const target = '≤ 1.5× quiet (p95)';
  if (typeof h === 'string') return [notMeasured('benign session call under a hostile neighbour', h, target)];
  const err = h.benignErrors ? ` (${h.benignErrors} benign errors)` : '';
  return [
    ['benign session print(1), quiet', h.quietMs.median, h.quietMs.p95, h.quietMs.p99, String(h.quietMs.n), '', 'floor', '', ''],
    [
      `benign session print(1), hostile neighbour (${h.attacks} attacks; gateway ${deployedAs(h.memoryLimit)})${err}`,
      h.underAttackMs.median,
      h.underAttackMs.p95,
      h.underAttackMs.p99,
      String(h.underAttackMs.n),
      '',
      `p50 ${x(h.p50Ratio)} p95 ${x(h.p95Ratio)}`,
      target,
      meets(h.benignErrors === 0 ? atMost(h.p95Ratio, 1.5) : false),
    ],
  ];
}

function storageRows(storage: Results['storage']): Cell[][] {
  const target = 'starts; RSS not growing with output size';
  if (typeof storage === 'string') return [notMeasured('gateway RSS after restart, large finished runs', storage, target)];
  return storage.map((row): Cell[] => {
    const kib = Math.round(row.fieldBytes / 1024);
    const peak = row.probe.maxRss === undefined ? '' : `, peak ${(row.probe.maxRss / 1e6).toFixed(1)} MB`;
    const capped =
      typeof row.capped === 'string'
        ? `heap capped at 384 MiB: ${row.capped.slice(0, 60)}`
        : `heap capped at 384 MiB: ${(row.capped.rss / 1e6).toFixed(1)} MB, peak ${((row.capped.maxRss ?? 0) / 1e6).toFixed(1)} MB`;
    return [
      `gateway RSS after restart, ${row.runs} finished runs of 4 × ${kib} KiB (code, stdin, stdout, stderr), plain node${peak}; ${capped}`,
      `${(row.probe.rss / 1e6).toFixed(1)} MB`,
      '',
      '',
      '1',
      '',
      '',
      target,
      meets(typeof row.capped !== 'string'),
    ];
  });
}

function backToBackRow(b: Results['backToBack']): Cell[] {
  const name = 'back-to-back warm execute_code, default pool';
  if (typeof b === 'string') return notMeasured(name, b);
  const err = b.errors ? `, ${b.errors} errors` : '';
  return [
    `${name} (p90 ${b.p90}; ${b.coldFallbacks} went cold, included; pool grew to ${b.poolTarget}${err})`,
    b.ms.median,
    b.ms.p95,
    b.ms.p99,
    String(b.ms.n),
    '',
    '',
    '',
    '',
  ];
}

export const HEADER = ['figure (latency in ms)', 'median', 'p95', 'p99', 'n', 'rate', 'vs floor', 'target (brief)', 'meets'];

export function tableRows(r: Results): Cell[][] {
  const q = r.ratios;
  const coldNote = (w: Results['warmTransient'] | Results['warmAtRestDeployed']): string =>
    w !== undefined && typeof w !== 'string' && w.coldFallbacks ? ` (${w.coldFallbacks} went cold, excluded)` : '';
  const warm = coldNote(r.warmTransient);
  return [
    latencyRow("raw exec python3 -c 'print(1)'", r.rawExecPrint1, undefined, 'floor'),
    latencyRow('raw exec true', r.rawExecTrue),
    latencyRow('raw pod create→Running→exec', r.rawPodFloor, undefined, 'floor'),
    latencyRow(
      `warm transient execute_code (pool on), right after the pool refilled${warm}`,
      r.warmTransient,
      q.warmVsRawExec,
      '≤ 0.5× raw exec',
      atMost(q.warmVsRawExec, 0.5),
    ),
    ...(r.warmAtRest === undefined
      ? []
      : [
          latencyRow(
            `warm transient execute_code (pool on), at rest${typeof r.warmAtRest === 'string' ? '' : ` (${r.warmAtRest.restMs / 1000} s after the refill)`}${coldNote(r.warmAtRest)}`,
            r.warmAtRest,
            q.warmAtRestVsRawExec,
            '≤ 0.5× raw exec',
            atMost(q.warmAtRestVsRawExec, 0.5),
          ),
        ]),
    ...(r.warmAtRestDeployed === undefined
      ? []
      : [
          latencyRow(
            `warm transient execute_code at rest, gateway in its own process, ${deployedAs(typeof r.warmAtRestDeployed === 'string' ? undefined : r.warmAtRestDeployed.memoryLimit)}${coldNote(r.warmAtRestDeployed)}`,
            r.warmAtRestDeployed,
            q.warmAtRestDeployedVsRawExec,
            '≤ 0.5× raw exec',
            atMost(q.warmAtRestDeployedVsRawExec, 0.5),
          ),
        ]),
    latencyRow('session execute_code', r.session, q.sessionVsRawExec, '≤ 0.05× raw exec', atMost(q.sessionVsRawExec, 0.05)),
    ...(r.sessionDeployed === undefined
      ? []
      : [
          latencyRow(
            `session execute_code, gateway in its own process, ${deployedAs(typeof r.sessionDeployed === 'string' ? undefined : r.sessionDeployed.memoryLimit)}`,
            r.sessionDeployed,
            q.sessionDeployedVsRawExec,
            '≤ 0.05× raw exec',
            atMost(q.sessionDeployedVsRawExec, 0.05),
          ),
        ]),
    latencyRow(
      r.profile.coldMinusFloorPairedMs ? 'cold execute_code (pool off; vs floor: call by call, same relist phase)' : 'cold execute_code (pool off)',
      r.cold,
      q.coldVsPodFloor,
      '≤ 1.0× raw pod',
      atMost(q.coldVsPodFloor, 1.0),
    ),
    backToBackRow(r.backToBack),
    ...throughputRows(r),
    ...apiRow('cold', r.apiRequests.cold),
    ...apiRow('warm', r.apiRequests.warm),
    ...rssRows(r),
    rssSessionsRow(r.rss100Sessions),
    ...hostileRows(r.hostile),
    ...storageRows(r.storage),
    ...codeModeRows(r.codeMode, q.nestedCallVsDirect),
    ...plotsRows(r.plots),
  ];
}

function plotsRows(p: Results['plots']): Cell[][] {
  if (typeof p === 'string') return [notMeasured('datascience profile: warm imports, plot round trip', p, '≤ 1.0× raw exec')];
  const ratio = (a: Latency, b: Latency): number | null => (b.ms.median > 0 && a.ms.n > 0 ? a.ms.median / b.ms.median : null);
  const warmVs = ratio(p.warmImport, p.rawPrint1);
  return [
    latencyRow("raw exec python3 -c 'print(1)', datascience image", p.rawPrint1, undefined, 'floor'),
    latencyRow('raw exec of import numpy, pandas, matplotlib; print(1)', p.rawImport, ratio(p.rawImport, p.rawPrint1)),
    latencyRow('warm execute_code of the imports, datascience profile (pre-imported)', p.warmImport, warmVs, '≤ 1.0× raw exec', atMost(warmVs, 1.0)),
    latencyRow('warm execute_code print(1), datascience profile', p.warmPrint1, ratio(p.warmPrint1, p.rawPrint1)),
    latencyRow('cold execute_code of the imports (profile without a pool)', p.coldImport, ratio(p.coldImport, p.rawPrint1)),
    latencyRow('session execute_code print(1), datascience profile', p.print1, undefined, 'floor'),
    latencyRow(`plot round trip: 640×480 line plot back as image content (${Math.round(p.pngBytes / 1024)} KiB PNG)`, p.plot, ratio(p.plot, p.print1)),
    latencyRow('install_packages of one small package (tabulate 0.9.0) into a session', p.install),
  ];
}

function codeModeRows(c: Results['codeMode'], vs: number | null | undefined): Cell[][] {
  const target = '≤ 1.2× direct';
  if (typeof c === 'string') return [notMeasured('nested tool call from sandbox code', c, target)];
  const tokenRow = (name: string, v: number): Cell[] => [name, v, '', '', '1', '', '', '', ''];
  return [
    latencyRow('tool call from the gateway process (echo, warm client)', c.direct, undefined, 'floor'),
    latencyRow(
      `nested tool call from sandbox code (echo, in a session; +${(c.nested.ms.median - c.direct.ms.median).toFixed(1)} ms)`,
      c.nested,
      vs,
      target,
      atMost(vs, 1.2),
    ),
    ['nested tool calls per second, one session', '', '', '', '', `${c.callsPerSecond}/s`, '', '', ''],
    tokenRow(`context tokens: the upstream's tools/list (${c.tokens.upstreamTools} tools)`, c.tokens.upstreamToolsList),
    tokenRow('context tokens: a synthetic 500-tool tools/list', c.tokens.synthetic500ToolsList),
    tokenRow("context tokens: the gateway's tools/list in code mode (any catalog)", c.tokens.gatewayToolsList),
    tokenRow(`search_tools answer, ${c.searchTokens.hits} hits: tokens as text lines`, c.searchTokens.text),
    tokenRow(`search_tools answer, ${c.searchTokens.hits} hits: tokens as compact JSON`, c.searchTokens.json),
    tokenRow(`search_tools answer, ${c.searchTokens.hits} hits: tokens as TOON`, c.searchTokens.toon),
  ];
}

export function renderResults(r: Results): string {
  return renderTable(HEADER, tableRows(r));
}

/** The profile and breakdowns printed under the table. */
export function summaryLines(r: Results): string[] {
  const lines: string[] = [];
  const fmt = (c: Record<string, number>): string =>
    Object.entries(c)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, v]) => `${k} ${v}`)
      .join(', ');
  const phaseLine = (phase: string, s: Summary, indent = '  '): string =>
    `${indent}${phase.padEnd(48 - indent.length)} ${String(s.median).padStart(7)}   p95 ${s.p95}`;
  const phases = (name: string, p: PhaseProfile | undefined): void => {
    if (!p) return;
    lines.push(`${name} phases, median ms (${p.profiled} calls; ${p.runningStatusPatches} with a Running status patch too):`);
    for (const [phase, s] of Object.entries(p.phasesMs)) lines.push(phaseLine(phase, s));
    const skipped = Object.entries(p.skipped);
    if (skipped.length) lines.push(`WARNING: ${name}: calls left out of the phases for a missing mark: ${skipped.map(([m, n]) => `${n} × "${m}"`).join(', ')}`);
  };
  const trips = (name: string, t: Record<string, Summary> | undefined): void => {
    if (t)
      lines.push(
        `${name} API round trips over the batch (final status patch, pod delete, completion Event: after the reply; connect: to the open websocket), median ms: ${Object.entries(
          t,
        )
          .map(([k, v]) => `${k} ${v.median} (n=${v.n})`)
          .join(', ')}`,
      );
  };
  if (typeof r.backToBack !== 'string') lines.push(`back-to-back calls in order, ms (c: went cold, e: failed): ${r.backToBack.sequence}`);
  phases('cold execute_code', r.profile.cold);
  const coldKernel = r.profile.coldKernel;
  if (coldKernel?.calls) {
    lines.push(`  of which, from the kernel stream's frames (${coldKernel.calls} calls):`);
    for (const [phase, s] of Object.entries(coldKernel.phasesMs)) lines.push(phaseLine(phase, s, '    '));
  }
  trips('cold', r.profile.coldApiRoundTripsMs);
  const warmPhases = (name: string, profile: PhaseProfile | undefined, kernel: KernelSplit | undefined): void => {
    phases(name, profile);
    if (!kernel) return;
    lines.push(
      `  of which, from the kernel stream's frames (${kernel.calls} calls; stream ready before the claim in ${kernel.streamReadyBeforeClaim}, opened on the call's path in ${kernel.streamOpenedOnPath}; run frame sent before the create's answer in ${kernel.runBeforeCreated}):`,
    );
    for (const [phase, s] of Object.entries(kernel.phasesMs)) lines.push(phaseLine(phase, s, '    '));
  };
  warmPhases('warm execute_code', r.profile.warm, r.profile.warmKernel);
  warmPhases('warm execute_code at rest', r.profile.warmAtRest, r.profile.warmAtRestKernel);
  trips('warm', r.profile.warmApiRoundTripsMs);
  if (typeof r.warmTransient !== 'string' && r.warmTransient.streamWaitTimeouts) {
    lines.push(
      `WARNING: ${r.warmTransient.streamWaitTimeouts} warm calls were made before the operator's kernel stream to every ready pool pod had answered (STREAM_TIMEOUT_MS, bench/warm.ts)`,
    );
  }
  // A run executed twice: its pod created twice (cold), or two pool pods claimed for it (warm).
  const twice = (n: number | undefined, of: Latency | string, how: string): string =>
    `${n ?? '?'} of ${typeof of === 'string' ? '?' : of.ms.n + of.errors} (${how})`;
  if (r.profile.coldRunsExecutedTwice !== undefined || r.profile.warmRunsExecutedTwice !== undefined) {
    const parts = [
      ...(r.profile.coldRunsExecutedTwice !== undefined ? [`cold ${twice(r.profile.coldRunsExecutedTwice, r.cold, 'pod created twice')}`] : []),
      ...(r.profile.warmRunsExecutedTwice !== undefined ? [`warm ${twice(r.profile.warmRunsExecutedTwice, r.warmTransient, 'two pool pods claimed')}`] : []),
    ];
    const any = (r.profile.coldRunsExecutedTwice ?? 0) + (r.profile.warmRunsExecutedTwice ?? 0) > 0;
    lines.push(`${any ? 'WARNING: ' : ''}runs executed twice: ${parts.join('; ')}`);
  }
  const paired = r.profile.coldMinusFloorPairedMs;
  if (paired)
    lines.push(
      `cold − raw pod floor, call by call at the same relist phase (n=${paired.n}), ms: median ${paired.median}, mean ${paired.mean}, p95 ${paired.p95}, min ${paired.min}`,
    );
  if (typeof r.rawPodFloor !== 'string') {
    const f = r.rawPodFloor.phasesMs;
    lines.push(
      `raw pod floor, median ms from create: create call ${f.createCall.median}, scheduled ${f.toScheduled.median}, Ready ${f.toReady.median}; first exec ${f.exec.median}; delete call ${f.delete.median}`,
    );
  }
  if (r.profile.execSplit)
    lines.push(
      `exec in a running pod, median ms: raw python3 -c ${r.profile.execSplit.rawPythonMs.median}, cold path's runner script + python ${r.profile.execSplit.runnerPythonMs.median}`,
    );
  if (r.profile.apiRequest) {
    const a = r.profile.apiRequest;
    lines.push(
      `one API GET, median ms: client-node as shipped (new TCP+TLS connection each; the bench's floors) ${a.clientNodeGetMs.median}, client-node with reuseConnections (the operator) ${a.reusedClientNodeGetMs.median}, one kept-alive HTTPS connection ${a.keepAliveGetMs.median}`,
    );
  }
  if (r.profile.mcpRoundTripMs)
    lines.push(`MCP round trip without Kubernetes (refused empty code), median ${r.profile.mcpRoundTripMs.median} ms, p95 ${r.profile.mcpRoundTripMs.p95} ms`);
  if (typeof r.session !== 'string') lines.push(`create_session: ${r.session.createMs} ms`);
  if (typeof r.codeMode !== 'string' && r.codeMode?.nestedFirstCallsMs)
    lines.push(
      `code mode: both paths timed after ${r.codeMode.warmupCalls} unrecorded calls; the first ${r.codeMode.nestedFirstCallsMs.n} nested ones (a fresh gateway's broker path) median ${r.codeMode.nestedFirstCallsMs.median} ms, p95 ${r.codeMode.nestedFirstCallsMs.p95} ms`,
    );
  if (typeof r.codeMode !== 'string' && r.codeMode?.split) {
    const { nestedMeanMs, brokerMeanMs } = r.codeMode.split;
    lines.push(
      `code mode: a timed nested call took a mean ${nestedMeanMs} ms in the program, ${brokerMeanMs} ms of it in the gateway's broker (the upstream call and its checks) and ${(nestedMeanMs - brokerMeanMs).toFixed(2)} ms outside it (the exec stream both ways, the kernel, the sandbox's module)`,
    );
  }
  for (const [what, l] of [
    ['in-process', r.session],
    ['as deployed', r.sessionDeployed],
  ] as const) {
    if (l === undefined || typeof l === 'string' || !l.firstCallsMs) continue;
    lines.push(
      `session execute_code ${what}: recorded after ${l.warmupCalls} unrecorded calls; the first ${l.firstCallsMs.n} of those (a fresh gateway and client) median ${l.firstCallsMs.median} ms, p95 ${l.firstCallsMs.p95} ms`,
    );
  }
  for (const mode of ['cold', 'warm'] as const) {
    const a = r.apiRequests[mode];
    if (typeof a === 'string') continue;
    lines.push(`API writes per ${mode} run on the hot path (by the code): ${a.criticalPath.join(', ')} (NetworkPolicy: once per namespace)`);
    if (a.measuredBeforeReply)
      lines.push(`API writes per ${mode} run done before the reply (measured, ${a.measuredBeforeReply.calls} calls): ${fmt(a.measuredBeforeReply.byKey)}`);
    const execs = mode === 'warm' ? ' (connect pods/exec: kernel streams to the new pool pods, opened before any claim)' : '';
    lines.push(`API requests per ${mode} run, operator: ${fmt(a.operatorPerRun)}${execs}`);
    lines.push(`API requests per ${mode} run, API server (all clients): ${fmt(a.apiserverPerRun)}`);
    // A cold run is one exec: more execs than runs means some runs were executed again. (Warm
    // runs use no exec; their execs are kernel streams to new pool pods.)
    const extra = mode === 'cold' ? Math.round(((a.operatorPerRun['connect pods/exec'] ?? 0) - 1) * a.runs) : 0;
    if (extra > 0) lines.push(`WARNING: ${extra} more execs than ${a.runs} cold runs: some runs were executed twice (see docs/performance.md)`);
  }
  if (typeof r.rss !== 'string')
    lines.push(`retained heap per finished SandboxRun (after GC, compiled): ${(r.rss.heapBytesPerFinishedRun / 1024).toFixed(1)} KiB`);
  const live = r.rss100Sessions;
  if (typeof live !== 'string' && typeof r.rss !== 'string' && live.sessions > 0) {
    const perSession = (live.rss - r.rss.withFinishedRuns.compiled.rss) / live.sessions;
    const heapPerSession = (live.heapUsedAfterGc - r.rss.withFinishedRuns.compiled.heapUsedAfterGc) / live.sessions;
    lines.push(
      `per live session (kernel stream open, compiled): RSS ${(perSession / 1024).toFixed(0)} KiB, retained heap ${(heapPerSession / 1024).toFixed(1)} KiB; ${live.sessions} sessions opened in ${live.openSeconds} s`,
    );
    if (live.rssIdle !== undefined)
      lines.push(
        `gateway RSS at rest, ${live.sessions} live sessions + ${live.finishedRuns} finished runs (compiled, once V8 shrank the young generation start-up grew, after ${live.idleSeconds ?? 0} s): ${(live.rssIdle / 1e6).toFixed(1)} MB`,
      );
  }
  return lines;
}

/** Writes bench/results/latest.json and bench/results/<date>.json; returns both paths. */
export async function writeResults(r: Results, table: string): Promise<string[]> {
  const dir = fileURLToPath(new URL('./results/', import.meta.url));
  await mkdir(dir, { recursive: true });
  const body = `${JSON.stringify({ ...r, table: table.split('\n'), notes: summaryLines(r) }, null, 2)}\n`;
  const paths = [`${dir}latest.json`, `${dir}${r.date.replace(/:/g, '-')}.json`];
  for (const p of paths) await writeFile(p, body);
  return paths;
}
