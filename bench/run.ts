// `npm run bench`: the floors, execute_code over MCP, throughput, API requests per run and gateway
// memory, against the real test cluster, printed as one table and written to bench/results/.
// Everything runs in throwaway bench-* namespaces that are deleted at the end (also on Ctrl-C).
import { loadSettings, scaled, type BenchSettings } from './env.js';
import { createNamespace, deleteNamespace, testKube, type TestKube } from '../test/e2e/helpers/kube.js';
import { startOperator, type RunningOperator } from '../test/e2e/helpers/operator.js';
import { RequestTally, diff, parseRequestTotals, scrapeApiserver, summarizeApiRequests } from './api-requests.js';
import { PRINT_1, TRUE, rawExecLatency, rawPodFloor, startTargetPod, type LatencySamples } from './floor.js';
import { describeMachine, machineInfo } from './machine.js';
import { executeCodeLatency } from './mcp.js';
import { execSplit, profileColdCalls } from './profile.js';
import { NO_POOL, NO_SESSIONS, computeRatios, renderResults, writeResults, type Latency, type Results, type RssPair } from './report.js';
import { compileProbe, deleteSeededRuns, probeRss, seedFinishedRuns } from './rss.js';
import { PodTimeline, ensureNetworkPolicy } from './sandbox-pod.js';
import { rounded, summarize } from './stats.js';
import { executeCodeThroughput, rawExecThroughput } from './throughput.js';

const TARGET_POD = 'bench-target';
/** Post-reply writes (pod delete, Events) land within this after the last reply. */
const SETTLE_MS = 3000;

const log = (msg: string): void => void process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function latency(l: LatencySamples): Latency {
  return { ms: rounded(summarize(l.samples)), errors: l.errors, ...(l.firstError ? { firstError: l.firstError } : {}) };
}

const skipped = (section: string): string => `not measured (BENCH_ONLY without ${section})`;

class Namespaces {
  private readonly names: string[] = [];
  constructor(private readonly k: TestKube) {}
  async create(prefix: string): Promise<string> {
    const ns = await createNamespace(this.k, prefix);
    this.names.push(ns);
    return ns;
  }
  async deleteAll(): Promise<void> {
    await Promise.all(this.names.splice(0).map((ns) => deleteNamespace(this.k, ns)));
  }
}

async function floorSection(k: TestKube, s: BenchSettings, pods: PodTimeline, r: Results): Promise<void> {
  const n = scaled(s, s.execSamples, 10);
  log(`floor: raw exec python3 -c 'print(1)' × ${n}`);
  r.rawExecPrint1 = latency(await rawExecLatency(k, pods.namespace, TARGET_POD, PRINT_1, n));
  log(`floor: raw exec true × ${n}`);
  r.rawExecTrue = latency(await rawExecLatency(k, pods.namespace, TARGET_POD, TRUE, n));
  const m = scaled(s, s.podSamples);
  log(`floor: raw pod create → Running → exec × ${m}`);
  const f = await rawPodFloor(k, pods, m);
  const phase = (key: 'createCall' | 'toScheduled' | 'toReady' | 'exec' | 'delete') => rounded(summarize(f.samples.map((x) => x[key])));
  r.rawPodFloor = {
    ms: rounded(summarize(f.samples.map((x) => x.total))),
    errors: f.errors,
    ...(f.firstError ? { firstError: f.firstError } : {}),
    phasesMs: { createCall: phase('createCall'), toScheduled: phase('toScheduled'), toReady: phase('toReady'), exec: phase('exec'), delete: phase('delete') },
  };
  log('profile: runner exec vs raw exec in one pod');
  r.profile.execSplit = await execSplit(k, pods.namespace, TARGET_POD, scaled(s, 40));
}

async function coldSection(k: TestKube, s: BenchSettings, op: RunningOperator, tally: RequestTally, pods: PodTimeline, r: Results): Promise<void> {
  const n = scaled(s, s.coldSamples);
  log(`cold: execute_code print(1) × ${n} (API server metrics scraped around the batch)`);
  let before = {};
  let from = 0;
  const lat = await executeCodeLatency(op.url, n, {
    afterWarmup: async () => {
      await sleep(SETTLE_MS);
      before = parseRequestTotals(await scrapeApiserver(k.kc));
      from = performance.now();
    },
  });
  await sleep(SETTLE_MS);
  const after = parseRequestTotals(await scrapeApiserver(k.kc));
  r.cold = latency(lat);
  r.apiRequests = summarizeApiRequests(n, diff(after, before), tally.countsBetween(from, performance.now()));
  r.profile.cold = profileColdCalls(lat.calls, tally, pods);
}

async function throughputSection(k: TestKube, s: BenchSettings, op: RunningOperator, coldPods: PodTimeline, floorNs: string, r: Results): Promise<void> {
  const windowMs = Math.max(2000, Math.round(s.throughputSeconds * 1000 * s.scale));
  const t: Exclude<Results['throughput'], string> = { windowSeconds: windowMs / 1000, executeCode: [], rawExec: [] };
  for (const c of s.concurrency) {
    await coldPods.drained(60_000);
    log(`throughput: execute_code, ${c} clients, ${windowMs / 1000} s`);
    t.executeCode.push(await executeCodeThroughput(op.url, c, windowMs));
    log(`throughput: raw exec to one pod, ${c} callers, ${windowMs / 1000} s`);
    t.rawExec.push(await rawExecThroughput(k, floorNs, TARGET_POD, c, windowMs));
  }
  r.throughput = t;
}

async function rssSection(k: TestKube, s: BenchSettings, nss: Namespaces, r: Results): Promise<void> {
  const ns = await nss.create('bench-rss');
  const count = scaled(s, s.finishedRuns, 10);
  log('rss: compiling the probe to plain JavaScript');
  const compiled = await compileProbe();
  try {
    const probe = async (): Promise<RssPair> => ({ tsx: await probeRss(ns, 'tsx'), compiled: await probeRss(ns, 'compiled', compiled.dir) });
    log('rss: probes on an empty namespace');
    const empty = await probe();
    log(`rss: seeding ${count} finished SandboxRuns`);
    const seedSeconds = await seedFinishedRuns(k, ns, count);
    log('rss: probes with the finished runs');
    const full = await probe();
    const perRun = Math.round((full.compiled.heapUsedAfterGc - empty.compiled.heapUsedAfterGc) / count);
    r.rss = { finishedRuns: count, seedSeconds: Math.round(seedSeconds * 10) / 10, heapBytesPerFinishedRun: perRun, emptyNamespace: empty, withFinishedRuns: full };
  } finally {
    await compiled.remove();
    await deleteSeededRuns(k, ns);
  }
}

async function main(): Promise<void> {
  const s = loadSettings();
  const k = testKube();
  const nss = new Namespaces(k);
  const interrupted = async (): Promise<void> => {
    log('interrupted: deleting bench namespaces');
    await nss.deleteAll();
    process.exit(130);
  };
  process.once('SIGINT', () => void interrupted());
  process.once('SIGTERM', () => void interrupted());

  const machine = await machineInfo(k);
  log(`scale ${s.scale}, sections ${[...s.sections].join(',')}; ${describeMachine(machine)}`);
  const r: Results = {
    date: new Date().toISOString(),
    scale: s.scale,
    machine,
    rawExecPrint1: skipped('floor'),
    rawExecTrue: skipped('floor'),
    rawPodFloor: skipped('floor'),
    warmTransient: NO_POOL,
    session: NO_SESSIONS,
    cold: skipped('cold'),
    throughput: skipped('throughput'),
    apiRequests: skipped('cold'),
    rss: skipped('rss'),
    rss100Sessions: NO_SESSIONS,
    profile: {},
    ratios: {},
  };
  const stops: Array<() => Promise<void>> = [];
  try {
    const needFloor = s.sections.has('floor') || s.sections.has('throughput');
    const floorPods = new PodTimeline(k, needFloor ? await nss.create('bench-floor') : 'unused');
    if (needFloor) {
      await ensureNetworkPolicy(k, floorPods.namespace);
      await floorPods.start();
      stops.push(() => floorPods.stop());
      await startTargetPod(k, floorPods, TARGET_POD);
      if (s.sections.has('floor')) await floorSection(k, s, floorPods, r);
    }
    if (s.sections.has('cold') || s.sections.has('throughput')) {
      const ns = await nss.create('bench-cold');
      // Pool off: there is no warm pool yet. When it lands, set its size to 0 here.
      const op = await startOperator(ns);
      stops.push(() => op.stop());
      const tally = new RequestTally(op.clients.kc);
      const coldPods = new PodTimeline(k, ns);
      await coldPods.start();
      stops.push(() => coldPods.stop());
      if (s.sections.has('cold')) await coldSection(k, s, op, tally, coldPods, r);
      if (s.sections.has('throughput')) await throughputSection(k, s, op, coldPods, floorPods.namespace, r);
    }
    for (const stop of stops.splice(0).reverse()) await stop();
    if (s.sections.has('rss')) await rssSection(k, s, nss, r);
  } finally {
    for (const stop of stops.splice(0).reverse()) await stop().catch(() => undefined);
    log('deleting bench namespaces');
    await nss.deleteAll();
  }
  r.ratios = computeRatios(r);
  const table = renderResults(r);
  const paths = await writeResults(r, table);
  process.stdout.write(`\ncodemode-operator bench, ${r.date}, scale ${s.scale}\n${describeMachine(machine)}\n\n${table}\n\n`);
  if (r.profile.cold) process.stdout.write(`cold execute_code phases (median ms): ${Object.entries(r.profile.cold.phasesMs).map(([p, v]) => `${p} ${v.median}`).join('; ')}\n`);
  if (typeof r.rss !== 'string') process.stdout.write(`retained heap per finished SandboxRun (after GC, compiled): ${(r.rss.heapBytesPerFinishedRun / 1024).toFixed(1)} KiB\n`);
  if (r.profile.execSplit) process.stdout.write(`exec in a running pod (median ms): raw python3 ${r.profile.execSplit.rawPythonMs.median}, runner script ${r.profile.execSplit.runnerPythonMs.median}\n`);
  process.stdout.write(`\nwrote ${paths.join(' and ')}\n`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
