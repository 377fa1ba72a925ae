// The chart's monitoring (issue 10): the alert rules pass `promtool check rules` and their promtool
// unit tests (rules/alerts.test.yaml, one firing case per alert), and every dashboard query and
// alert expression reads metrics the gateway exports, with label values from the API's closed sets.
// The same files are evaluated on a real Prometheus in test/e2e/prometheus.test.ts.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { promisify } from 'node:util';
import { parse } from 'yaml';
import { beforeAll, describe, expect, it } from 'vitest';
import { Reasons } from '../../src/api/v1alpha1/index.js';
import { createMetrics } from '../../src/metrics/registry.js';
import { ALERTS, ALERT_TESTS, alertRules, dashboard, metricNames, panelQueries, unitOf } from '../e2e/helpers/chart-monitoring.js';
import { ADMISSION_LIMITS } from '../../src/limits/admission.js';
import { ensurePrometheus, type PrometheusBins } from '../e2e/helpers/prometheus.js';

const run = promisify(execFile);
let bins: PrometheusBins;

beforeAll(async () => {
  bins = await ensurePrometheus();
}, 300_000);

async function exported(): Promise<Set<string>> {
  const metrics = await createMetrics().registry.getMetricsAsJSON();
  return new Set(metrics.map((m) => m.name));
}

describe('alert rules (charts/codemode-operator/rules)', () => {
  it('are valid Prometheus rules', async () => {
    const { stdout } = await run(bins.promtool, ['check', 'rules', ALERTS]);
    expect(stdout).toContain(`SUCCESS: ${alertRules().length} rules found`);
  });

  it('pass their promtool unit tests', async () => {
    // promtool resolves rule_files relative to the test file.
    const r = await run(bins.promtool, ['test', 'rules', ALERT_TESTS.split('/').pop() ?? ''], { cwd: dirname(ALERT_TESTS) }).catch(
      (err: { stdout?: string; stderr?: string }) => {
        throw new Error(`promtool test rules failed:\n${err.stdout ?? ''}${err.stderr ?? ''}`);
      },
    );
    expect(r.stdout).toContain('SUCCESS');
  });

  it('each have a promtool test in which they fire', () => {
    const tests = parse(readFileSync(ALERT_TESTS, 'utf8')) as { tests: Array<{ alert_rule_test: Array<{ alertname: string; exp_alerts: unknown[] }> }> };
    const firing = new Set(tests.tests.flatMap((t) => t.alert_rule_test.filter((a) => a.exp_alerts.length > 0).map((a) => a.alertname)));
    for (const rule of alertRules()) expect(firing, rule.alert).toContain(rule.alert);
  });

  it('name only reasons the API declares', () => {
    const known = new Set<string>(Object.values(Reasons));
    for (const rule of alertRules()) {
      for (const m of rule.expr.matchAll(/reason=~?"([^"]+)"/g)) {
        for (const reason of (m[1] ?? '').split('|')) expect(known, `${rule.alert}: ${reason}`).toContain(reason);
      }
    }
  });
});

describe('dashboard and alerts read metrics the gateway exports', () => {
  it.each([...panelQueries().map((q) => [`panel ${q.name}`, q.expr] as const), ...alertRules().map((r) => [`alert ${r.alert}`, r.expr] as const)])(
    '%s',
    async (_name, expr) => {
      const names = metricNames(expr);
      expect(names.length).toBeGreaterThan(0);
      const have = await exported();
      for (const n of names) expect(have, n).toContain(n);
    },
  );

  // A query is drawn in its metric's unit: a latency quantile in seconds, memory in bytes, even in
  // a panel whose other queries are rates.
  it('draws every query in its unit', () => {
    const wrong: string[] = [];
    for (const p of dashboard().panels.flatMap((x) => [x, ...(x.panels ?? [])])) {
      for (const t of p.targets ?? []) {
        const want = /histogram_quantile\(.*_seconds_bucket/.test(t.expr)
          ? 's'
          : /histogram_quantile\(.*_bytes_bucket/.test(t.expr) || /process_resident_memory_bytes/.test(t.expr)
            ? 'bytes'
            : undefined;
        if (want !== undefined && unitOf(p, t.refId) !== want) wrong.push(`${p.title} / ${t.refId}: ${unitOf(p, t.refId)} for ${want}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('names every capacity limit in the rejections panel', () => {
    const p = dashboard().panels.find((x) => x.targets?.some((t) => t.expr.includes('codemode_admission_rejections_total')));
    for (const limit of ADMISSION_LIMITS) expect(p?.description, limit).toMatch(new RegExp(`\\b${limit}\\b`));
  });

  it('has unique panel ids, a datasource variable and a job filter on every query', () => {
    const d = dashboard();
    const ids = d.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(d.templating.list.map((v) => v.name)).toEqual(['datasource', 'job']);
    for (const q of panelQueries(d)) expect(q.expr, q.name).toContain('job=~"$job"');
  });
});
