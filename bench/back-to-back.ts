// Back-to-back warm calls as a new user makes them: one client, the default pool settings, each
// execute_code sent as soon as the previous one answered, nothing waited for in between. The
// figure the demand-sized pool is for (issue 13: a fixed pool of 2 drained and p90 was 2 s):
// p50/p90 of the calls and how many fell back to a cold pod.
import { connect, startOperator } from '../test/e2e/helpers/operator.js';
import { until } from '../test/e2e/helpers/kube.js';
import { failed, log, stopAll, type BenchContext } from './context.js';
import { scaled } from './env.js';
import type { Latency } from './report.js';
import { percentile, rounded, summarize } from './stats.js';

export interface BackToBack extends Latency {
  p90: number;
  /** Calls that ran in a pod of their own instead of a pool pod. */
  coldFallbacks: number;
  /** The pool size the leader aimed for after the calls. */
  poolTarget: number;
  /** Every call in order: its milliseconds, `c` when it went cold, `e` when it failed. */
  sequence: string;
}

const CODE = 'import socket\nprint(socket.gethostname())';

export async function backToBackSection(ctx: BenchContext, samples = 40): Promise<void> {
  const { k, s, r } = ctx;
  const ns = await ctx.nss.create('bench-b2b');
  try {
    // Default bounds (CODEMODE_WARM_POOL_MIN 2, CODEMODE_WARM_POOL_MAX 8), set explicitly only
    // because the test helper turns the pool off when no pool variable is given.
    const op = await startOperator(ns, { CODEMODE_WARM_POOL_MIN: '2' });
    ctx.stops.push(() => op.stop());
    const ready = async (): Promise<number> =>
      (await k.core.listNamespacedPod({ namespace: ns, labelSelector: 'codemode.dev/pool=warm' })).items.filter((p) =>
        p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
      ).length;
    await until(async () => (await ready()) >= 2, 180_000, 'the minimum pool');
    const mcp = await connect(op.url, 'current');
    ctx.stops.push(() => mcp.close());
    const n = scaled(s, samples);
    log(`back-to-back: ${n} execute_code calls, each right after the previous reply, default pool bounds`);
    const ms: number[] = [];
    const sequence: string[] = [];
    let cold = 0;
    let errors = 0;
    let firstError: string | undefined;
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      const res = await mcp.callTool('execute_code', { code: CODE });
      ms.push(performance.now() - t0);
      let mark = '';
      if (res.isError) {
        errors++;
        mark = 'e';
        firstError ??= JSON.stringify(res.content).slice(0, 200);
      } else if (!String(res.structuredContent?.stdout ?? '').startsWith('codemode-pool-')) {
        cold++;
        mark = 'c';
      }
      sequence.push(`${Math.round(ms[i] ?? 0)}${mark}`);
    }
    const sorted = [...ms].sort((a, b) => a - b);
    r.backToBack = {
      ms: rounded(summarize(ms)),
      p90: Math.round(percentile(sorted, 90) * 10) / 10,
      errors,
      ...(firstError ? { firstError } : {}),
      coldFallbacks: cold,
      poolTarget: op.operator.poolController.target(),
      sequence: sequence.join(' '),
    };
  } catch (err) {
    r.backToBack = failed('back-to-back', err);
  } finally {
    await stopAll(ctx);
    await ctx.nss.delete(ns);
  }
}
