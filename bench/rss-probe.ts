// Child process of bench/rss.ts: starts a whole operator + gateway on one namespace, waits for the
// informers to sync and the first reconcile of every object, optionally opens live sessions (each a
// kernel pod with the gateway's exec stream to it, used once), and prints its memory as one JSON line.
// Like the gateway's entry point (src/entry.ts) it registers the hook that keeps client-node's
// unused API groups out, then loads the operator dynamically; nothing here may import a test helper
// that imports client-node's index (bench/batches.ts).
// Usage: tsx bench/rss-probe.ts <namespace> [sessions] [idle seconds]
import './env.js';
import { readFileSync } from 'node:fs';
import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { loadOnlyUsedClientNode } from '../src/kube/slim-load.js';
import type { RunningOperator } from '../test/e2e/helpers/start-operator.js';
import { PROBE_PREFIX, inBatches } from './batches.js';

loadOnlyUsedClientNode();
const { startOperator } = await import('../test/e2e/helpers/start-operator.js');

const SETTLE_MS = 3000;
/** Sessions created at once: the node starts pods in parallel, the API server takes the writes. */
const SESSION_BATCH = 10;
/**
 * Sessions only here: each is a pod, and the default requests (100m CPU) would fit ~15 on a
 * 2-core node. What is measured is the gateway's memory per live session, not the pods' size.
 * The cap on live sessions (32 by default) is raised above the count the probe opens.
 */
const SESSION_ENV = { CODEMODE_CPU_REQUEST: '1m', CODEMODE_MEMORY_REQUEST: '16Mi', CODEMODE_MAX_SESSIONS: '1000' };

/** Opens `n` python sessions and runs one call in each, so every kernel stream is open and used. */
function openSessions(op: RunningOperator, n: number): Promise<string[]> {
  return inBatches(n, SESSION_BATCH, async () => {
    const info = await op.operator.sessionService.create('python', undefined);
    const r = await op.operator.sessionService.execute(info.name, { code: 'x = 1\nx', timeoutSeconds: 30 });
    if (r.status !== 'ok') throw new Error(`session ${info.name}: the first call ended ${r.status}`);
    return info.name;
  });
}

/** Time for V8's background thread to unmap the pages the young generation gave up. */
const UNMAP_MS = 5000;
const newSpace = (): number => getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.space_size ?? 0;

/**
 * Start-up (module loading, the informers' lists) grows V8's young generation to its maximum
 * (2 × 16 MB semi-spaces) and it stays so until V8's memory reducer sees the process idle, some
 * 30 s later, and shrinks it. Waits (at most `maxSeconds`) until the young generation is under
 * half its size now, and returns the RSS then: what a gateway at rest holds.
 */
async function idleRss(maxSeconds: number): Promise<{ rssIdle: number; idleSeconds: number; newSpaceAtSettle: number; newSpaceIdle: number }> {
  const t0 = performance.now();
  const atSettle = newSpace();
  while (newSpace() > atSettle / 2 && performance.now() - t0 < maxSeconds * 1000) await new Promise((r) => setTimeout(r, 1000));
  // V8 unmaps the freed pages on a background thread, a moment after the young generation shrank.
  await new Promise((r) => setTimeout(r, UNMAP_MS));
  return { rssIdle: process.memoryUsage().rss, idleSeconds: Math.round((performance.now() - t0) / 1000), newSpaceAtSettle: atSettle, newSpaceIdle: newSpace() };
}

/**
 * This process's peak RSS: VmHWM in /proc/self/status, which exec resets. Not getrusage's maxRSS:
 * Linux keeps that across execve, so a child reports its parent's peak (the bench's, often bigger)
 * whenever that is higher than its own. Undefined where /proc is missing.
 */
function peakRss(): number | undefined {
  try {
    const kb = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1];
    return kb === undefined ? undefined : Number(kb) * 1024;
  } catch {
    return undefined;
  }
}

async function main(): Promise<void> {
  const ns = process.argv[2];
  const sessions = Number(process.argv[3] ?? '0');
  const idleSeconds = Number(process.argv[4] ?? '0');
  if (!ns || !Number.isInteger(sessions) || sessions < 0 || !(idleSeconds >= 0))
    throw new Error('usage: tsx bench/rss-probe.ts <namespace> [sessions] [idle seconds]');
  const before = process.memoryUsage().rss;
  const op = await startOperator(ns, sessions > 0 ? SESSION_ENV : {});
  const opened = await openSessions(op, sessions);
  // start() resolves once both informer caches are filled; give the controller's first pass over
  // every object (it requeues finished runs for their TTL) time to finish. `rss` is read before
  // any forced collection: what the process holds in normal operation.
  await new Promise((r) => setTimeout(r, SETTLE_MS));
  const m = process.memoryUsage();
  const idle = idleSeconds > 0 ? await idleRss(idleSeconds) : undefined;
  // Then what is really retained (for a per-object cost): heap after full collections.
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  for (let i = 0; i < 3; i++) {
    gc();
    await new Promise((r) => setTimeout(r, 50));
  }
  const g = process.memoryUsage();
  const maxRss = peakRss();
  const result = {
    sessions: opened.length,
    rssBeforeStart: before,
    rss: m.rss,
    heapUsed: m.heapUsed,
    heapTotal: m.heapTotal,
    external: m.external,
    rssAfterGc: g.rss,
    heapUsedAfterGc: g.heapUsed,
    maxRss,
    ...idle,
  };
  process.stdout.write(`${PROBE_PREFIX}${JSON.stringify(result)}\n`);
  await op.stop();
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`rss-probe failed: ${String(err)}\n`);
    process.exit(1);
  },
);
