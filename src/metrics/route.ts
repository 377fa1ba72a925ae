// GET /metrics on the gateway's app: the private registry in Prometheus text format. One place,
// used by main.ts and by the e2e operator that a real Prometheus scrapes (test/e2e/prometheus.test.ts).
//
// A rendering costs the one event loop every caller of the replica shares about 4 ms (measured:
// the registry's series at 0, more once they fill), and /metrics needs no credentials: anything
// in the cluster that reaches the port sending it a few hundred requests a second held the loop,
// and every user's calls with it. So the registry is rendered at most METRICS_RENDERS_PER_SECOND
// times a second (after a burst of as many); a faster scraper is served the last rendering, and
// requests that arrive while one is made share it. A Prometheus scraping every few seconds always
// gets a fresh one.
import type { Hono } from 'hono';
import { TokenBucket } from 'limiter';
import type { Registry } from 'prom-client';

/** Renderings of the registry a second, at most (after a burst of as many). */
export const METRICS_RENDERS_PER_SECOND = 10;

export function serveMetrics(app: Hono, registry: Registry): void {
  const renders = new TokenBucket({ bucketSize: METRICS_RENDERS_PER_SECOND, tokensPerInterval: METRICS_RENDERS_PER_SECOND, interval: 'second' });
  renders.content = METRICS_RENDERS_PER_SECOND;
  let last: string | undefined;
  let rendering: Promise<string> | undefined;
  const render = (): Promise<string> => {
    rendering ??= registry.metrics().finally(() => (rendering = undefined));
    return rendering;
  };
  app.get('/metrics', async (c) => {
    c.header('Content-Type', registry.contentType);
    if (rendering === undefined && last !== undefined && !renders.tryRemoveTokens(1)) return c.body(last);
    last = await render();
    return c.body(last);
  });
}
