// `npm run bench`: the floors, execute_code over MCP (cold, warm, session), throughput, API
// requests per run and gateway memory, against the real test cluster, printed as one table and
// written to bench/results/. Everything runs in throwaway bench-* namespaces that are deleted at
// the end (also on Ctrl-C). BENCH_SCALE, BENCH_ONLY, BENCH_CONCURRENCY: see bench/env.ts.
// First: Node's own undici Agent is found before anything loads the npm undici package (client-node's
// index does), so the in-process gateway's upstream clients use Node's fetch and Agent, as a
// deployed gateway's do (src/kube/node-undici.ts, src/upstreams/http-pool.ts).
import '../src/kube/node-undici.js';
import { fileURLToPath } from 'node:url';
import { backToBackSection } from './back-to-back.js';
import { codeModeSection } from './codemode.js';
import { plotsSection } from './plots.js';
import { loadSettings } from './env.js';
import { testKube } from '../test/e2e/helpers/kube.js';
import { Namespaces, failed, log, stopAll, type BenchContext } from './context.js';
import { measureStorage, storageShapes } from './storage.js';
import { startTargetPod } from './floor.js';
import { describeMachine, machineInfo } from './machine.js';
import { computeRatios, renderResults, summaryLines, writeResults, type Results } from './report.js';
import { PodTimeline, ensureNetworkPolicy } from './sandbox-pod.js';
import { installCrds } from '../scripts/install-crds.js';
import { TARGET_POD, coldSection, floorSection, hostileSection, rssSection, warmSection } from './sections.js';

const skipped = (section: string): string => `not measured (BENCH_ONLY without ${section})`;

async function sections(ctx: BenchContext): Promise<void> {
  const { k, s } = ctx;
  let floorPods: PodTimeline | undefined;
  if (s.sections.has('floor') || s.sections.has('throughput')) {
    const floorNs = await ctx.nss.create('bench-floor');
    const pods = new PodTimeline(k, floorNs);
    floorPods = pods;
    await ensureNetworkPolicy(k, floorNs);
    await pods.start();
    ctx.stops.push(() => pods.stop());
    await startTargetPod(k, pods, TARGET_POD);
    if (s.sections.has('floor')) await floorSection(ctx, pods);
  }
  if (s.sections.has('cold') || s.sections.has('throughput')) await coldSection(ctx, floorPods);
  await stopAll(ctx);
  if (s.sections.has('warm') || s.sections.has('session')) {
    await warmSection(ctx);
    await stopAll(ctx);
  }
  if (s.sections.has('backtoback')) await backToBackSection(ctx);
  if (s.sections.has('rss')) await rssSection(ctx);
  if (s.sections.has('storage')) {
    try {
      ctx.r.storage = await measureStorage(k, storageShapes(s.scale));
    } catch (err) {
      ctx.r.storage = failed('storage', err);
    }
  }
  if (s.sections.has('hostile')) await hostileSection(ctx);
  if (s.sections.has('codemode')) {
    ctx.r.codeMode = await codeModeSection(ctx);
    await stopAll(ctx);
  }
  if (s.sections.has('plots')) {
    ctx.r.plots = await plotsSection(ctx);
    await stopAll(ctx);
  }
}

async function main(): Promise<void> {
  const s = loadSettings();
  const k = testKube();
  const machine = await machineInfo(k);
  const r: Results = {
    date: new Date().toISOString(),
    scale: s.scale,
    machine,
    rawExecPrint1: skipped('floor'),
    rawExecTrue: skipped('floor'),
    rawPodFloor: skipped('floor'),
    warmTransient: skipped('warm'),
    session: skipped('session'),
    cold: skipped('cold'),
    throughput: skipped('throughput'),
    apiRequests: { cold: skipped('cold'), warm: skipped('warm') },
    rss: skipped('rss'),
    rss100Sessions: skipped('rss'),
    storage: skipped('storage'),
    hostile: skipped('hostile'),
    backToBack: skipped('backtoback'),
    codeMode: skipped('codemode'),
    plots: skipped('plots'),
    profile: {},
    ratios: {},
  };
  const ctx: BenchContext = { k, s, r, nss: new Namespaces(k), stops: [] };
  const interrupted = async (): Promise<void> => {
    log('interrupted: deleting bench namespaces');
    await ctx.nss.deleteAll();
    process.exit(130);
  };
  process.once('SIGINT', () => void interrupted());
  process.once('SIGTERM', () => void interrupted());

  log(`scale ${s.scale}, sections ${[...s.sections].join(',')}; ${describeMachine(machine)}`);
  // This checkout's CRDs, as npm test and npm start install them: a fresh cluster has none.
  await installCrds(k.kc, fileURLToPath(new URL('../crds', import.meta.url)), 'codemode-bench');
  try {
    await sections(ctx);
  } finally {
    await stopAll(ctx);
    log('deleting bench namespaces');
    await ctx.nss.deleteAll();
  }
  r.ratios = computeRatios(r);
  const table = renderResults(r);
  const paths = await writeResults(r, table);
  process.stdout.write(
    `\ncodemode-operator bench, ${r.date}, scale ${s.scale}\n${describeMachine(machine)}\n\n${table}\n\n${summaryLines(r).join('\n')}\n\nwrote ${paths.join(' and ')}\n`,
  );
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
