// A/B of the gateway's memory: this checkout against another one (a baseline commit, e.g. from
// `git worktree add`), both compiled, probed alternately on one namespace (bench/rss.ts): empty,
// with finished runs, then with live sessions too. Alternating spreads the shared machine's
// noise over both sides.
// Usage: tsx bench/rss-ab.ts <baseline checkout> [rounds=3] [finished runs=1000] [sessions=100]
import './env.js';
import { createNamespace, deleteNamespace, testKube } from '../test/e2e/helpers/kube.js';
import { compileProbe, deleteSeededRuns, deleteSessions, probeRss, seedFinishedRuns, type ProbeResult } from './rss.js';

/** How long each probe may wait for V8 to shrink the young generation (rss-probe.ts idleRss). */
const IDLE_SECONDS = 90;
// MB as the bench report and the target use them (10^6 bytes).
const MB = (b: number): string => (b / 1e6).toFixed(1);
const row = (label: string, r: ProbeResult): string =>
  `${label.padEnd(34)} rss ${MB(r.rss)}  idle ${r.rssIdle === undefined ? '-' : `${MB(r.rssIdle)} (${r.idleSeconds ?? 0} s)`}  after GC ${MB(r.rssAfterGc)}  heap ${MB(r.heapUsed)} (after GC ${MB(r.heapUsedAfterGc)})  before start ${MB(r.rssBeforeStart)}  peak ${MB(r.maxRss ?? 0)}  sessions ${r.sessions}`;

async function main(): Promise<void> {
  const [baseDir, roundsArg, runsArg, sessionsArg] = process.argv.slice(2);
  if (!baseDir) throw new Error('usage: tsx bench/rss-ab.ts <baseline checkout> [rounds] [finished runs] [sessions]');
  const rounds = Number(roundsArg ?? 3);
  const runs = Number(runsArg ?? 1000);
  const sessions = Number(sessionsArg ?? 100);
  const k = testKube();
  const ns = await createNamespace(k, 'bench-rss-ab');
  const sides = [
    { name: 'baseline', build: await compileProbe(baseDir) },
    { name: 'this checkout', build: await compileProbe() },
  ];
  const probeAll = async (what: string, n: number): Promise<void> => {
    for (let i = 0; i < rounds; i++)
      for (const s of sides) {
        process.stdout.write(`${row(`${s.name}, ${what}`, await probeRss(ns, 'compiled', s.build.dir, n, [], IDLE_SECONDS))}\n`);
        if (n > 0) await deleteSessions(k, ns);
      }
  };
  try {
    await probeAll('empty', 0);
    await seedFinishedRuns(k, ns, runs);
    await probeAll(`${runs} runs`, 0);
    if (sessions > 0) await probeAll(`${runs} runs + ${sessions} sessions`, sessions);
  } finally {
    for (const s of sides) await s.build.remove();
    await deleteSessions(k, ns).catch(() => undefined);
    await deleteSeededRuns(k, ns).catch(() => undefined);
    await deleteNamespace(k, ns);
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`rss-ab failed: ${String(err)}\n`);
    process.exit(1);
  },
);
