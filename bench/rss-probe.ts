// Child process of bench/rss.ts: starts a whole operator + gateway on one namespace, waits for the
// informers to sync and the first reconcile of every object, and prints its memory as one JSON line.
// Usage: tsx bench/rss-probe.ts <namespace>
import './env.js';
import { startOperator } from '../test/e2e/helpers/operator.js';
import { PROBE_PREFIX } from './rss.js';

const SETTLE_MS = 3000;

async function main(): Promise<void> {
  const ns = process.argv[2];
  if (!ns) throw new Error('usage: tsx bench/rss-probe.ts <namespace>');
  const before = process.memoryUsage().rss;
  const op = await startOperator(ns);
  // start() resolves once both informer caches are filled; give the controller's first pass over
  // every object (it requeues finished runs for their TTL) time to finish.
  await new Promise((r) => setTimeout(r, SETTLE_MS));
  const m = process.memoryUsage();
  process.stdout.write(`${PROBE_PREFIX}${JSON.stringify({ rssBeforeStart: before, rss: m.rss, heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external })}\n`);
  await op.stop();
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`rss-probe failed: ${String(err)}\n`);
    process.exit(1);
  },
);
