// Plots (issue 12): a Matplotlib figure's round trip — a session call on the data-science image
// that draws a 640×480 figure and gets it back as MCP image content — against the same session
// answering print(1), so the cost of rendering, collecting, checking and sending a PNG is visible.
import { connect, startOperator } from '../test/e2e/helpers/operator.js';
import { failed, latency, log, type BenchContext } from './context.js';
import { scaled } from './env.js';
import type { Latency } from './report.js';

export const DATASCIENCE_IMAGE = 'codemode.local/datascience:v1';

export interface PlotsResult {
  /** execute_code print(1) in a session on the data-science image (Matplotlib imported). */
  print1: Latency;
  /** execute_code of a line plot in the same session, its PNG back as image content. */
  plot: Latency;
  /** Decoded bytes of one returned PNG. */
  pngBytes: number;
}

const PLOT = 'plt.plot(range(100), [i * i for i in range(100)])';

export async function plotsSection(ctx: BenchContext): Promise<PlotsResult | string> {
  const n = scaled(ctx.s, 50, 10);
  try {
    const ns = await ctx.nss.create('bench-plots');
    const op = await startOperator(ns, { CODEMODE_IMAGE_PYTHON: DATASCIENCE_IMAGE });
    ctx.stops.push(() => op.stop());
    const client = await connect(op.url, 'current');
    ctx.stops.push(() => client.close());
    const created = await client.callTool('create_session', { language: 'python' });
    const session = created.structuredContent?.session;
    if (typeof session !== 'string') throw new Error(`create_session failed: ${JSON.stringify(created.content).slice(0, 200)}`);
    await client.callTool('execute_code', { session, code: 'import matplotlib.pyplot as plt', timeout_seconds: 120 });
    log(`plots: print(1) × ${n} and a 640×480 line plot × ${n}, one session on ${DATASCIENCE_IMAGE}`);
    const time = async (code: string, check: (r: Awaited<ReturnType<typeof client.callTool>>) => boolean): Promise<number[]> => {
      const ms: number[] = [];
      for (let i = 0; i < n + 3; i++) {
        const t0 = performance.now();
        const r = await client.callTool('execute_code', { session, code });
        if (r.isError || !check(r)) throw new Error(`a call failed: ${JSON.stringify(r.content).slice(0, 200)}`);
        if (i >= 3) ms.push(performance.now() - t0);
      }
      return ms;
    };
    const image = (r: { content: Array<{ type: string }> }): { data?: string } | undefined =>
      r.content.find((c) => c.type === 'image') as { data?: string } | undefined;
    const print1 = await time('print(1)', (r) => r.structuredContent?.stdout === '1\n');
    let pngBytes = 0;
    const plot = await time(PLOT, (r) => {
      pngBytes = Buffer.from(image(r)?.data ?? '', 'base64').length;
      return pngBytes > 0;
    });
    await client.callTool('close_session', { session });
    return { print1: latency({ samples: print1, errors: 0 }), plot: latency({ samples: plot, errors: 0 }), pngBytes };
  } catch (err) {
    return failed('plots', err);
  }
}
