// GET /metrics (src/metrics/route.ts): a rendering costs the event loop every caller shares a few
// ms and needs no credentials, so a client sending scrapes as fast as it can must not make one
// each; a scraper at Prometheus's pace always gets a fresh one.
import { Hono } from 'hono';
import { Counter, Registry } from 'prom-client';
import { describe, expect, it, vi } from 'vitest';
import { METRICS_RENDERS_PER_SECOND, serveMetrics } from '../../../src/metrics/route.js';

function served(): { app: Hono; counter: Counter; renders: () => number } {
  const registry = new Registry();
  const counter = new Counter({ name: 'test_things_total', help: 'Things.', registers: [registry] });
  const spy = vi.spyOn(registry, 'metrics');
  const app = new Hono();
  serveMetrics(app, registry);
  return { app, counter, renders: () => spy.mock.calls.length };
}

const scrape = async (app: Hono): Promise<string> => (await app.request('/metrics')).text();

describe('serveMetrics', () => {
  it('renders a flood of scrapes a few times a second, and serves each one', async () => {
    const { app, renders } = served();
    const started = performance.now();
    for (let i = 0; i < 300; i++) expect(await scrape(app)).toMatch(/^test_things_total 0$/m);
    const seconds = (performance.now() - started) / 1000;
    expect(renders()).toBeLessThanOrEqual(1 + METRICS_RENDERS_PER_SECOND * (1 + Math.ceil(seconds)));
  });

  it('shares one rendering among scrapes that arrive together', async () => {
    const { app, renders } = served();
    await Promise.all(Array.from({ length: 50 }, () => scrape(app)));
    expect(renders()).toBe(1);
  });

  it('serves a fresh rendering to a scraper at a steady pace', async () => {
    const { app, counter } = served();
    for (let i = 1; i <= 3; i++) {
      counter.inc();
      expect(await scrape(app)).toMatch(new RegExp(`^test_things_total ${i}$`, 'm'));
      await new Promise((r) => setTimeout(r, 1000 / METRICS_RENDERS_PER_SECOND + 20));
    }
  });
});
