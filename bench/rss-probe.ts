// Child process of bench/rss.ts: starts a whole operator + gateway on one namespace, waits for the
// informers to sync and the first reconcile of every object, and prints its memory as one JSON line.
// Usage: tsx bench/rss-probe.ts <namespace>
import './env.js';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { startOperator } from '../test/e2e/helpers/operator.js';
import { PROBE_PREFIX } from './rss.js';

const SETTLE_MS = 3000;

async function main(): Promise<void> {
  const ns = process.argv[2];
  if (!ns) throw new Error('usage: tsx bench/rss-probe.ts <namespace>');
  const before = process.memoryUsage().rss;
  const op = await startOperator(ns);
  // start() resolves once both informer caches are filled; give the controller's first pass over
  // every object (it requeues finished runs for their TTL) time to finish. `rss` is read before
  // any forced collection: what the process holds in normal operation.
  await new Promise((r) => setTimeout(r, SETTLE_MS));
  const m = process.memoryUsage();
  // Then what is really retained (for a per-object cost): heap after full collections.
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  for (let i = 0; i < 3; i++) {
    gc();
    await new Promise((r) => setTimeout(r, 50));
  }
  const g = process.memoryUsage();
  const result = { rssBeforeStart: before, rss: m.rss, heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external, rssAfterGc: g.rss, heapUsedAfterGc: g.heapUsed };
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
