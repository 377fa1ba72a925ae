// GET /metrics on the gateway's app: the private registry in Prometheus text format. One place,
// used by main.ts and by the e2e operator that a real Prometheus scrapes (test/e2e/prometheus.test.ts).
import type { Hono } from 'hono';
import type { Registry } from 'prom-client';

export function serveMetrics(app: Hono, registry: Registry): void {
  app.get('/metrics', async (c) => {
    c.header('Content-Type', registry.contentType);
    return c.body(await registry.metrics());
  });
}
