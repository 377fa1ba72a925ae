// The bench's sections, each filling its slots of the results. Operators run in this process
// (startOperator) on their own bench-* namespace, with instance hooks counting their API calls.
import { startOperator, type RunningOperator } from '../test/e2e/helpers/operator.js';
import { apiRequestFloor } from './api-floor.js';
import {
  COLD_CRITICAL_PATH,
  RequestTally,
  WARM_CRITICAL_PATH,
  diff,
  parseRequestTotals,
  scrapeApiserver,
  summarizeApiRequests,
  type Counts,
} from './api-requests.js';
import { failed, latency, log, sleep, stopAll, type BenchContext } from './context.js';
import { scaled } from './env.js';
import { PRINT_1, PodFloorBatch, TRUE, rawExecLatency, rawPodFloor, type PodFloorResult } from './floor.js';
import { untilRelistPhase } from './relist-phase.js';
import { freePort, startGateway, stopGateway } from '../test/e2e/faults/helpers/gateway-process.js';
import { hostileNeighbour, tokensCsv } from './hostile.js';
import { executeCodeLatency, mcpRoundTrip, type LatencyOptions, type McpLatency } from './mcp.js';
import {
  COLD_MARKS,
  CallTimer,
  WARM_MARKS,
  execSplit,
  coldKernelSplit,
  kernelSplit,
  podsCreatedTwice,
  profileCalls,
  roundTrips,
  runsClaimedTwice,
  writesBeforeReply,
} from './profile.js';
import type { Results, RssPair } from './report.js';
import { gatewayMemoryLimit, type MemoryLimit } from './memory-limit.js';
import { compileProbe, deleteSeededRuns, deleteSessions, probeRss, seedFinishedRuns } from './rss.js';
import { PodTimeline } from './sandbox-pod.js';
import { rounded, summarize, type Summary } from './stats.js';
import { executeCodeThroughput, openSessions, rawExecThroughput, type ThroughputLevel } from './throughput.js';
import {
  FIRST_CALLS,
  POOL_SIZE,
  REST_MS,
  SESSION_WARMUP_CALLS,
  kernelsUnavailable,
  sessionLatency,
  sessionsUnavailable,
  warmLatency,
  type SessionLatency,
} from './warm.js';

export const TARGET_POD = 'bench-target';
/** Post-reply writes (final status patch, pod delete, Events) land within this after the last reply. */
const SETTLE_MS = 3000;

export async function floorSection(ctx: BenchContext, pods: PodTimeline): Promise<void> {
  const { k, s, r } = ctx;
  const n = scaled(s, s.execSamples, 10);
  log(`floor: raw exec python3 -c 'print(1)' × ${n}`);
  r.rawExecPrint1 = latency(await rawExecLatency(k, pods.namespace, TARGET_POD, PRINT_1, n));
  log(`floor: raw exec true × ${n}`);
  r.rawExecTrue = latency(await rawExecLatency(k, pods.namespace, TARGET_POD, TRUE, n));
  // With the cold row, the pod floor's calls alternate with its calls (coldSection).
  if (!s.sections.has('cold')) {
    const m = scaled(s, s.podSamples);
    log(`floor: raw pod create → Running → exec × ${m}`);
    r.rawPodFloor = podFloorRow(await rawPodFloor(k, pods, m));
  }
  log('profile: one API GET, client-node as shipped vs with reuseConnections vs one kept-alive connection');
  r.profile.apiRequest = await apiRequestFloor(k, scaled(s, 100, 10));
  log('profile: cold-path runner exec vs raw exec in one pod');
  r.profile.execSplit = await execSplit(k, pods.namespace, TARGET_POD, scaled(s, 40));
}

interface Instrumented {
  op: RunningOperator;
  tally: RequestTally;
  timer: CallTimer;
  pods: PodTimeline;
}

/** An operator on a fresh namespace, with its API calls counted and its pods watched. */
async function instrumentedOperator(ctx: BenchContext, prefix: string, env: Record<string, string>): Promise<Instrumented> {
  const ns = await ctx.nss.create(prefix);
  const op = await startOperator(ns, env);
  ctx.stops.push(() => op.stop());
  // Hooks first: the pool starts filling, and its kernel streams opening, as soon as it started.
  const tally = new RequestTally(op.clients.kc);
  const timer = new CallTimer(op.clients);
  const pods = new PodTimeline(ctx.k, ns);
  await pods.start();
  ctx.stops.push(() => pods.stop());
  return { op, tally, timer, pods };
}

/** Runs `measure` with the API server's counters scraped around its recorded part. */
async function withApiCounts<T extends McpLatency>(
  ctx: BenchContext,
  tally: RequestTally,
  measure: (o: LatencyOptions) => Promise<T>,
): Promise<{ lat: T; server: Counts; operator: Counts; from: number; to: number }> {
  let before: Counts = {};
  let from = 0;
  const lat = await measure({
    afterWarmup: async () => {
      await sleep(SETTLE_MS);
      before = parseRequestTotals(await scrapeApiserver(ctx.k.kc));
      from = performance.now();
    },
  });
  await sleep(SETTLE_MS);
  const after = parseRequestTotals(await scrapeApiserver(ctx.k.kc));
  const to = performance.now();
  return { lat, server: diff(after, before), operator: tally.countsBetween(from, to), from, to };
}

/**
 * Cold execute_code (pool off), its API requests and phases, then throughput on the same operator.
 * With the floor section, the raw pod floor is measured here: its calls alternate with the cold
 * calls, each pair at the same phase of the kubelet's relist (relist-phase.ts), so the two rows see
 * the same node and the same relist waits; the API server's request counts then come from a
 * batch of cold calls of their own (the floor's requests would be counted too).
 */
export async function coldSection(ctx: BenchContext, floorPods: PodTimeline | undefined): Promise<void> {
  const { s, r } = ctx;
  // Pool off: every run creates its own pod.
  const { op, tally, timer, pods } = await instrumentedOperator(ctx, 'bench-cold', { CODEMODE_WARM_POOL_SIZE: '0' });
  if (s.sections.has('cold')) {
    const n = scaled(s, s.coldSamples);
    const floor = s.sections.has('floor') && floorPods ? new PodFloorBatch(ctx.k, floorPods) : undefined;
    const anchor = (): number | undefined => latest(floorPods?.lastReadyMs(), pods.lastReadyMs());
    let call = 0;
    let recording = false;
    let from = 0;
    // Every phase of the kubelet's relist alike; with the floor, its call and the cold call at the same one.
    const atPhase = (): Promise<void> => untilRelistPhase(anchor(), call++);
    const paired = async (): Promise<void> => {
      const i = call++;
      await untilRelistPhase(anchor(), i);
      await floor?.one(recording);
      await untilRelistPhase(anchor(), i);
    };
    const afterWarmup = async (): Promise<void> => {
      await sleep(SETTLE_MS);
      recording = true;
      from = performance.now();
    };
    let m: { lat: McpLatency; from: number; to: number };
    if (floor) {
      log(`cold: execute_code print(1) × ${n}, each after a raw pod floor call at the same relist phase`);
      const lat = await executeCodeLatency(op.url, n, { beforeEach: paired, afterWarmup });
      m = { lat, from, to: performance.now() };
      r.rawPodFloor = podFloorRow(floor.result);
      const floors = floor.result.samples.map((x) => x.total);
      if (floor.result.errors === 0 && lat.errors === 0 && floors.length === lat.samples.length)
        r.profile.coldMinusFloorPairedMs = rounded(summarize(lat.samples.map((c, i) => c - (floors[i] ?? 0))));
      const nApi = scaled(s, Math.round(s.coldSamples / 2), 10);
      log(`cold: execute_code print(1) × ${nApi} alone (API server metrics scraped around the batch)`);
      const apiBatch = await withApiCounts(ctx, tally, (o) => executeCodeLatency(op.url, nApi, { ...o, beforeEach: atPhase }));
      r.apiRequests.cold = {
        ...summarizeApiRequests(apiBatch.lat.calls.length + apiBatch.lat.errors, apiBatch.server, apiBatch.operator, COLD_CRITICAL_PATH),
        measuredBeforeReply: writesBeforeReply(apiBatch.lat.calls, timer),
      };
    } else {
      log(`cold: execute_code print(1) × ${n} (API server metrics scraped around the batch)`);
      const withCounts = await withApiCounts(ctx, tally, (o) => executeCodeLatency(op.url, n, { ...o, beforeEach: atPhase }));
      m = withCounts;
      r.apiRequests.cold = {
        ...summarizeApiRequests(withCounts.lat.calls.length + withCounts.lat.errors, withCounts.server, withCounts.operator, COLD_CRITICAL_PATH),
        measuredBeforeReply: writesBeforeReply(withCounts.lat.calls, timer),
      };
    }
    r.cold = latency(m.lat);
    r.profile.cold = profileCalls(m.lat.calls, tally, timer, pods, COLD_MARKS);
    r.profile.coldKernel = coldKernelSplit(m.lat.calls, timer);
    r.profile.coldApiRoundTripsMs = roundTrips(timer, m.from, m.to);
    r.profile.coldRunsExecutedTwice = podsCreatedTwice(timer, m.from, m.to).length;
    log('profile: MCP round trip without Kubernetes');
    r.profile.mcpRoundTripMs = rounded(summarize(await mcpRoundTrip(op.url, scaled(s, 100, 10))));
  }
  if (s.sections.has('throughput') && floorPods) await throughputSection(ctx, op.url, pods, floorPods.namespace);
}

/** The later of two moments (either may be unknown). */
function latest(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined ? b : b === undefined ? a : Math.max(a, b);
}

/** The raw pod floor's row: the calls' totals and each phase. */
function podFloorRow(f: PodFloorResult): Results['rawPodFloor'] {
  const phase = (key: 'createCall' | 'toScheduled' | 'toReady' | 'exec' | 'delete') => rounded(summarize(f.samples.map((x) => x[key])));
  return {
    ...latency({ samples: f.samples.map((x) => x.total), errors: f.errors, firstError: f.firstError }),
    phasesMs: { createCall: phase('createCall'), toScheduled: phase('toScheduled'), toReady: phase('toReady'), exec: phase('exec'), delete: phase('delete') },
  };
}

async function throughputSection(ctx: BenchContext, url: string, coldPods: PodTimeline, floorNs: string): Promise<void> {
  const { k, s, r } = ctx;
  const windowMs = Math.max(2000, Math.round(s.throughputSeconds * 1000 * s.scale));
  const t: Exclude<Results['throughput'], string> = { windowSeconds: windowMs / 1000, executeCode: [], rawExec: [] };
  for (const c of s.concurrency) {
    await coldPods.drained(60_000);
    log(`throughput: cold execute_code, ${c} clients, ${windowMs / 1000} s`);
    t.executeCode.push(await executeCodeThroughput(url, c, windowMs));
    log(`throughput: raw exec to one pod, ${c} callers, ${windowMs / 1000} s`);
    t.rawExec.push(await rawExecThroughput(k, floorNs, TARGET_POD, c, windowMs));
  }
  r.throughput = t;
  t.session = await sessionThroughput(ctx, windowMs);
}

/**
 * The same clients, each calling in its own session: runs that start no pod. A dedicated operator
 * whose pods request 5m CPU, so one session per client fits on a small node at every level.
 */
async function sessionThroughput(ctx: BenchContext, windowMs: number): Promise<ThroughputLevel[] | string> {
  const noSessions = await sessionsUnavailable(ctx.k);
  if (noSessions) return noSessions;
  try {
    const ns = await ctx.nss.create('bench-sthr');
    const most = Math.max(...ctx.s.concurrency);
    // One session per client at the highest level (the default cap, 32, is below 64 clients).
    const op = await startOperator(ns, { CODEMODE_CPU_REQUEST: '5m', CODEMODE_MEMORY_REQUEST: '32Mi', CODEMODE_MAX_SESSIONS: String(most) });
    ctx.stops.push(() => op.stop());
    log(`throughput: opening ${most} sessions`);
    const sessions = await openSessions(op.url, most);
    const levels: ThroughputLevel[] = [];
    for (const c of ctx.s.concurrency) {
      log(`throughput: session execute_code, ${c} clients, ${windowMs / 1000} s`);
      levels.push(await executeCodeThroughput(op.url, c, windowMs, sessions));
    }
    return levels;
  } catch (err) {
    return failed('session throughput', err);
  }
}

/** Warm transient execute_code (pool on) and, on the same operator, session execute_code. */
export async function warmSection(ctx: BenchContext): Promise<void> {
  const { k, s, r } = ctx;
  const noKernels = kernelsUnavailable();
  if (noKernels) {
    log(`warm, session: ${noKernels}`);
    if (s.sections.has('warm')) r.warmTransient = r.apiRequests.warm = noKernels;
    if (s.sections.has('session')) r.session = noKernels;
    return;
  }
  const { op, tally, timer, pods } = await instrumentedOperator(ctx, 'bench-warm', {
    CODEMODE_WARM_POOL_SIZE: String(POOL_SIZE),
    CODEMODE_WARM_POOL_MAX: String(POOL_SIZE),
    // An A/B of the reserved pod (CODEMODE_WARM_POOL_RESERVE=0 in the bench's environment: every warm run claims).
    ...(process.env.CODEMODE_WARM_POOL_RESERVE !== undefined && { CODEMODE_WARM_POOL_RESERVE: process.env.CODEMODE_WARM_POOL_RESERVE }),
  });
  if (s.sections.has('warm')) {
    try {
      const n = scaled(s, s.warmSamples);
      log(`warm: execute_code print(1) × ${n}, each with the pool full (${POOL_SIZE} ready pods, kernel streams open)`);
      const m = await withApiCounts(ctx, tally, (o) => warmLatency(op.url, pods, n, o, 0, timer));
      r.warmTransient = { ...latency(m.lat), coldFallbacks: m.lat.coldFallbacks, streamWaitTimeouts: m.lat.streamWaitTimeouts };
      r.apiRequests.warm = {
        ...summarizeApiRequests(m.lat.calls.length + m.lat.coldFallbacks + m.lat.errors, m.server, m.operator, WARM_CRITICAL_PATH),
        measuredBeforeReply: writesBeforeReply(m.lat.calls, timer),
      };
      r.profile.warm = profileCalls(m.lat.calls, tally, timer, undefined, WARM_MARKS);
      r.profile.warmKernel = kernelSplit(m.lat.calls, timer);
      r.profile.warmApiRoundTripsMs = roundTrips(timer, m.from, m.to);
      r.profile.warmRunsExecutedTwice = runsClaimedTwice(timer, m.from, m.to).length;
    } catch (err) {
      r.warmTransient = failed('warm', err);
    }
    try {
      const n = scaled(s, s.warmSamples);
      log(`warm: execute_code print(1) × ${n} at rest, each ${REST_MS} ms after the pool refilled`);
      const lat = await warmLatency(op.url, pods, n, {}, REST_MS, timer);
      r.warmAtRest = { ...latency(lat), coldFallbacks: lat.coldFallbacks, streamWaitTimeouts: lat.streamWaitTimeouts, restMs: REST_MS };
      r.profile.warmAtRest = profileCalls(lat.calls, tally, timer, undefined, WARM_MARKS);
      r.profile.warmAtRestKernel = kernelSplit(lat.calls, timer);
    } catch (err) {
      r.warmAtRest = failed('warm at rest', err);
    }
    await warmAtRestAsDeployed(ctx);
  }
  if (s.sections.has('session')) {
    const why = await sessionsUnavailable(k);
    if (why) {
      r.session = why;
      log(`session: ${why}`);
      return;
    }
    try {
      const n = scaled(s, s.sessionSamples, 10);
      log(`session: create_session, then execute_code print(1) × ${n} in it`);
      const l = await sessionLatency(op.url, n);
      r.session = { ...latency(l), createMs: Math.round(l.createMs), ...firstCalls(l) };
    } catch (err) {
      r.session = failed('session', err);
    }
    await sessionAsDeployed(ctx);
  }
}

/** The first of a session row's warm-up calls (SESSION_WARMUP_CALLS), reported beside the row. */
function firstCalls(l: SessionLatency): { warmupCalls: number; firstCallsMs: Summary } {
  return { warmupCalls: SESSION_WARMUP_CALLS, firstCallsMs: rounded(summarize(l.warmupSamples.slice(0, FIRST_CALLS))) };
}

/** The chart's memory limit for a gateway (or probe) in a process of its own, or undefined (logged) where none can be set. */
function deployedLimit(section: string): MemoryLimit | undefined {
  const limit = gatewayMemoryLimit();
  if (typeof limit !== 'string') return limit;
  log(`${section}: the gateway's process runs without the chart's memory limit: ${limit}`);
  return undefined;
}

/** The env of a gateway the bench starts in a process of its own on namespace `ns`. */
function gatewayEnv(ns: string): Record<string, string> {
  return {
    CODEMODE_NAMESPACE: ns,
    CODEMODE_IMAGE_PULL_POLICY: 'Never',
    CODEMODE_AUTH_MODE: 'none',
    CODEMODE_LOG_LEVEL: 'warn',
    CODEMODE_WARM_POOL_SIZE: String(POOL_SIZE),
    CODEMODE_WARM_POOL_MAX: String(POOL_SIZE),
  };
}

/**
 * Session calls against a gateway in a process of its own, as deployed: the row above shares one
 * event loop between the MCP client and the gateway, so the gateway's after-reply work (the audit
 * record, its watch events) delays the client's next request there and nowhere else.
 */
async function sessionAsDeployed(ctx: BenchContext): Promise<void> {
  const { s, r } = ctx;
  const ns = await ctx.nss.create('bench-sdep');
  try {
    const limit = deployedLimit('session');
    const gateway = await startGateway(gatewayEnv(ns), await freePort(), undefined, limit?.wrap);
    try {
      const n = scaled(s, s.sessionSamples, 10);
      log(`session: the same × ${n} against a gateway in its own process`);
      const l = await sessionLatency(gateway.url, n);
      r.sessionDeployed = { ...latency(l), createMs: Math.round(l.createMs), ...firstCalls(l), ...(limit && { memoryLimit: limit.quantity }) };
    } finally {
      await stopGateway(gateway);
    }
  } catch (err) {
    r.sessionDeployed = failed('session as deployed', err);
  } finally {
    await ctx.nss.delete(ns);
  }
}

/**
 * Warm runs at rest against a gateway in a process of its own, as deployed: in the rows above the
 * client shares the operator's event loop, so the operator's after-reply work (the run's status
 * and audit writes, its pod's deletion, the refill) is in the time between the result frame and
 * the reply the client reads, which a caller of a deployed gateway never waits for.
 */
async function warmAtRestAsDeployed(ctx: BenchContext): Promise<void> {
  const { k, s, r } = ctx;
  const ns = await ctx.nss.create('bench-wdep');
  const pods = new PodTimeline(k, ns);
  try {
    await pods.start();
    const limit = deployedLimit('warm');
    const gateway = await startGateway(gatewayEnv(ns), await freePort(), undefined, limit?.wrap);
    try {
      const n = scaled(s, s.warmSamples);
      log(`warm: the at-rest row × ${n} against a gateway in its own process`);
      const lat = await warmLatency(gateway.url, pods, n, {}, REST_MS);
      r.warmAtRestDeployed = { ...latency(lat), coldFallbacks: lat.coldFallbacks, restMs: REST_MS, ...(limit && { memoryLimit: limit.quantity }) };
    } finally {
      await stopGateway(gateway);
    }
  } catch (err) {
    r.warmAtRestDeployed = failed('warm at rest as deployed', err);
  } finally {
    await pods.stop();
    await ctx.nss.delete(ns);
  }
}

/** How long the probe with live sessions may wait for V8 to shrink its young generation (bench/rss-probe.ts). */
const IDLE_SECONDS = 90;

/** Gateway RSS on an empty namespace and with many finished runs, with tsx and compiled. */
export async function rssSection(ctx: BenchContext): Promise<void> {
  const { k, s, r } = ctx;
  const ns = await ctx.nss.create('bench-rss');
  const count = scaled(s, s.finishedRuns, 10);
  log('rss: compiling the probe to plain JavaScript');
  const compiled = await compileProbe();
  // The compiled probes are the deployed gateway: under the chart's memory limit, from which Node
  // sizes V8's heap (bench/memory-limit.ts). The tsx probes are a developer's process: no limit.
  const deployed = deployedLimit('rss');
  try {
    const probe = async (): Promise<RssPair> => ({
      tsx: await probeRss(ns, 'tsx'),
      compiled: await probeRss(ns, 'compiled', compiled.dir, 0, [], 0, deployed),
    });
    log('rss: probes on an empty namespace');
    const empty = await probe();
    log(`rss: seeding ${count} finished SandboxRuns`);
    const seedSeconds = await seedFinishedRuns(k, ns, count);
    log('rss: probes with the finished runs');
    const full = await probe();
    const perRun = Math.round((full.compiled.heapUsedAfterGc - empty.compiled.heapUsedAfterGc) / count);
    r.rss = {
      finishedRuns: count,
      seedSeconds: Math.round(seedSeconds * 10) / 10,
      heapBytesPerFinishedRun: perRun,
      emptyNamespace: empty,
      withFinishedRuns: full,
    };
    const sessions = scaled(s, s.liveSessions, 2);
    log(`rss: probe (compiled) opening ${sessions} live sessions, with the finished runs`);
    try {
      const t0 = performance.now();
      const live = await probeRss(ns, 'compiled', compiled.dir, sessions, [], IDLE_SECONDS, deployed);
      r.rss100Sessions = { ...live, finishedRuns: count, openSeconds: Math.round((performance.now() - t0) / 100) / 10 };
    } catch (err) {
      r.rss100Sessions = failed('rss with sessions', err);
    }
  } finally {
    await compiled.remove();
    await deleteSessions(k, ns).catch(() => undefined);
    await deleteSeededRuns(k, ns);
    await ctx.nss.delete(ns);
  }
}

/** A benign client's session latency, quiet and while a hostile client attacks (same operator). */
export async function hostileSection(ctx: BenchContext): Promise<void> {
  const { k, s, r } = ctx;
  const why = kernelsUnavailable() ?? (await sessionsUnavailable(k));
  if (why) {
    r.hostile = why;
    return;
  }
  const ns = await ctx.nss.create('bench-hostile');
  try {
    // The gateway in a process of its own, as deployed: the attacker's and the benign client's MCP
    // clients (this process) are not the gateway's event loop.
    const limit = deployedLimit('hostile');
    // The benign client and the attacker are two users (static tokens), as neighbours are.
    await k.core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'bench-tokens' }, stringData: { 'tokens.csv': tokensCsv() } } });
    const env = { ...gatewayEnv(ns), CODEMODE_AUTH_MODE: 'tokens', CODEMODE_AUTH_TOKENS_SECRET: 'bench-tokens' };
    const gateway = await startGateway(env, await freePort(), undefined, limit?.wrap);
    ctx.stops.push(() => stopGateway(gateway));
    r.hostile = { ...(await hostileNeighbour(gateway.url, scaled(s, s.hostileSamples, 10))), ...(limit && { memoryLimit: limit.quantity }) };
  } catch (err) {
    r.hostile = failed('hostile', err);
  } finally {
    await stopAll(ctx);
    await ctx.nss.delete(ns);
  }
}
