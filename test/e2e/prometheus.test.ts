// The chart's monitoring against a real Prometheus (Debian's package, test/cluster/install-prometheus.sh):
// it scrapes an operator (own namespace, warm pool of one, sandbox self-check on) while cold, warm
// and session calls run; then EVERY query of the Grafana dashboard must return data, and EVERY
// alert expression must be valid PromQL and silent while the operator is healthy. Grafana's
// variables get fixed values ($__rate_interval → a window covering the whole test).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { readFileSync } from 'node:fs';
import { ALERTS, DASHBOARD, alertRules, panelQueries, substitute } from './helpers/chart-monitoring.js';
import { CHART, helm } from './helpers/helm.js';
import { createNamespace, deleteNamespace, testKube, until } from './helpers/kube.js';
import { connect, startOperator, type RunningOperator, type TestClient, type ToolResult } from './helpers/operator.js';
import { ensurePrometheus, startPrometheus, type RunningPrometheus } from './helpers/prometheus.js';
import { startEverything, type Everything } from './helpers/upstream.js';
import { createUpstream, readyOf, upstreamStatus } from './helpers/upstream-servers.js';

const k = testKube();
const JOB = 'codemode-e2e';
const VARS = { rate: '10m', job: JOB };
// A busy shared node can keep the canary (and so the first check) waiting for CPU for minutes.
const CHECK_WAIT_MS = 480_000;
let ns = '';
let op: RunningOperator | undefined;
let prom: RunningPrometheus | undefined;
let mcp: TestClient | undefined;
/** A real upstream (the reference everything server), for the code-mode panel's nested calls. */
let everything: Everything | undefined;

beforeAll(async () => {
  const bins = await ensurePrometheus();
  ns = await createNamespace(k, 'prometheus');
  op = await startOperator(
    ns,
    { CODEMODE_WARM_POOL_MIN: '1', CODEMODE_WARM_POOL_MAX: '1', CODEMODE_CPU_REQUEST: '10m' },
    { metrics: true, sandboxCheck: true },
  );
  const check = op.operator.sandboxCheck;
  await until(() => check?.status.kind === 'checked', CHECK_WAIT_MS, 'a completed sandbox check');
  // Prometheus scrapes from before the first call, so rates see the calls happen.
  prom = await startPrometheus(bins, new URL(op.metricsUrl ?? '').host, JOB);
  // Counters that moved before their first scrape would show no rate: wait for one first.
  await until(() => promHas(`codemode_runs_total{job="${JOB}"}`), 60_000, 'the first scrape');
  mcp = await connect(op.url, 'current');
  everything = await startEverything();
  await createUpstream(k, ns, 'everything', { url: everything.url });
  await until(async () => readyOf(await upstreamStatus(k, ns, 'everything')).status === 'True', 60_000, 'the UpstreamServer Ready');
}, 600_000);

afterAll(async () => {
  await mcp?.close().catch(() => undefined);
  await prom?.stop();
  await op?.stop();
  await everything?.kill();
  if (ns) await deleteNamespace(k, ns);
});

const sc = (r: ToolResult): Record<string, unknown> => r.structuredContent ?? {};

async function metric(pattern: RegExp): Promise<number> {
  const text = (await op?.metrics?.registry.metrics()) ?? '';
  return Number(pattern.exec(text)?.[1] ?? 0);
}

/** True once Prometheus answers `expr` with at least one series. */
async function promHas(expr: string): Promise<boolean> {
  const r = await prom?.query(expr);
  return r?.status === 'success' && (r.data?.result.length ?? 0) > 0;
}

const poolReady = (): Promise<number> => metric(/^codemode_warm_pool_ready_pods (\d+)/m);

describe('the dashboard and the alerts on a real Prometheus', () => {
  it('has data for every panel query after cold, warm and session calls', async () => {
    const client = mcp as TestClient;
    // With a pool of one, three calls at once: one takes the warm pod, one may wait for its
    // starting replacement (a claim waits for a starting pool pod), and the third, or both, start a
    // cold pod. A refill faster than the claims could make all warm: then go again (bounded).
    for (let round = 0; round < 4; round++) {
      await until(async () => (await poolReady()) >= 1, 180_000, 'a ready warm pod');
      const [ok, failed, third] = await Promise.all([
        client.callTool('execute_code', { code: 'print(6 * 7)' }),
        client.callTool('execute_code', { code: 'import sys\nprint("x" * 100)\nsys.exit(3)' }),
        client.callTool('execute_code', { code: 'print(1)' }),
      ]);
      expect(sc(third), JSON.stringify(third.content)).toMatchObject({ phase: 'Succeeded', stdout: '1\n' });
      expect(sc(ok), JSON.stringify(ok.content)).toMatchObject({ phase: 'Succeeded', stdout: '42\n' });
      expect(sc(failed), JSON.stringify(failed.content)).toMatchObject({ phase: 'Failed', reason: 'NonZeroExit' });
      const warm = await metric(/^codemode_pod_start_seconds_count\{start="warm"\} (\d+)/m);
      const cold = await metric(/^codemode_pod_start_seconds_count\{start="cold"\} (\d+)/m);
      if (warm >= 1 && cold >= 1) break;
    }
    expect(await metric(/^codemode_pod_start_seconds_count\{start="warm"\} (\d+)/m)).toBeGreaterThanOrEqual(1);
    expect(await metric(/^codemode_pod_start_seconds_count\{start="cold"\} (\d+)/m)).toBeGreaterThanOrEqual(1);

    const created = await client.callTool('create_session', { language: 'python' });
    expect(created.isError ?? false, JSON.stringify(created.content)).toBe(false);
    const session = String(sc(created).session);
    expect(sc(await client.callTool('execute_code', { code: 'x = 41\nx + 1', session }))).toMatchObject({ phase: 'Succeeded', result: '42' });
    expect(sc(await client.callTool('execute_code', { code: 'raise ValueError("boom")', session }))).toMatchObject({ phase: 'Failed', reason: 'Exception' });
    // A nested tool call from session code, for the code-mode panel.
    expect(sc(await client.callTool('execute_code', { code: 'from codemode import mcp\nmcp.everything.echo(message="m")', session }))).toMatchObject({
      result: "'Echo: m'",
    });
    expect(sc(await client.callTool('close_session', { session }))).toMatchObject({ closed: true });

    // The last call is in Prometheus once a scrape after it landed.
    await until(() => promHas(`codemode_session_calls_total{job="${JOB}",reason="Exception"} > 0`), 60_000, 'Prometheus to scrape the session calls');
    await until(() => promHas(`codemode_run_duration_seconds_count{job="${JOB}",start="cold"} > 0`), 60_000, 'Prometheus to scrape the recorded runs');

    // A rate needs two scrapes of a series after it appeared: poll every query (bounded).
    const queries = panelQueries();
    expect(queries.length).toBeGreaterThan(20);
    let empty: string[] = [];
    const deadline = Date.now() + 90_000;
    do {
      empty = [];
      for (const q of queries) {
        const expr = substitute(q.expr, VARS);
        const r = await prom?.query(expr);
        expect(r?.status, `${q.name}: ${expr}: ${r?.error ?? ''}`).toBe('success');
        if ((r?.data?.result.length ?? 0) === 0) empty.push(`${q.name}: ${expr}`);
      }
      if (empty.length > 0) await new Promise((r) => setTimeout(r, 1000));
    } while (empty.length > 0 && Date.now() < deadline);
    expect(empty, `panel queries without data:\n${empty.join('\n')}`).toEqual([]);
  }, 900_000);

  it('finds every alert expression valid and silent while healthy', async () => {
    // Healthy, and every alert's inputs in Prometheus, so silence means healthy, not "read
    // nothing": the pool refilled after the calls, a leader holds the Lease, the check passed,
    // and the rates the ratios divide by exist (a rate needs two scrapes of a changed series).
    for (const input of [
      `max(codemode_warm_pool_ready_pods{job="${JOB}"}) >= 1`,
      `max(codemode_warm_pool_target_pods{job="${JOB}"}) >= 1`,
      `max(leader_election_master_status{job="${JOB}"}) == 1`,
      `min(codemode_sandbox_check_enforced{job="${JOB}"}) == 1`,
      `codemode_sandbox_check_last_success_timestamp_seconds{job="${JOB}"} > 0`,
      `sum by (namespace) (rate(codemode_runs_total{job="${JOB}"}[10m])) + sum by (namespace) (rate(codemode_session_calls_total{job="${JOB}"}[10m])) > 0`,
      `sum by (namespace, controller) (rate(controller_runtime_reconcile_total{job="${JOB}",controller=~"sandboxrun|sandboxsession"}[15m])) > 0`,
      `sum by (namespace) (rate(codemode_kube_api_requests_total{job="${JOB}"}[10m])) > 0`,
      `sum by (namespace) (rate(codemode_auth_requests_total{job="${JOB}",outcome="accepted"}[5m])) > 0`,
      `max(codemode_gateway_replicas{job="${JOB}"}) == 1`,
      `count(codemode_gateway_replicas_gone_total{job="${JOB}",how="expired"}) == 1`,
    ]) {
      await until(() => promHas(input), 180_000, `Prometheus to show ${input}`);
    }
    const rules = alertRules();
    expect(rules.map((r) => r.alert).sort()).toEqual([
      'CodemodeAuthUnavailable',
      'CodemodeExecutionFailureRatioHigh',
      'CodemodeKubeApiErrors',
      'CodemodeNoLeader',
      'CodemodeReconcileErrors',
      'CodemodeReplicaLost',
      'CodemodeSandboxCheckFailing',
      'CodemodeSandboxNotEnforced',
      'CodemodeWarmPoolEmpty',
    ]);
    for (const rule of rules) {
      const r = await prom?.query(rule.expr);
      expect(r?.status, `${rule.alert}: ${r?.error ?? ''}`).toBe('success');
      expect(r?.data?.result, `${rule.alert} fires while healthy`).toEqual([]);
    }
  }, 600_000);

  // Helm is part of the test cluster (cluster:up builds it), as for the helm e2e tests: no skip.
  it('ships exactly these files in the chart (PrometheusRule, dashboard ConfigMap)', async () => {
    const out = await helm(
      'template',
      't',
      CHART,
      '--set',
      'prometheusRule.enabled=true',
      '--show-only',
      'templates/prometheusrule.yaml',
      '--show-only',
      'templates/grafana-dashboard.yaml',
    );
    const docs = parseAllDocuments(out).map((d) => d.toJS() as { kind: string; spec?: { groups: unknown }; data?: Record<string, string> });
    const rule = docs.find((d) => d.kind === 'PrometheusRule');
    const cm = docs.find((d) => d.kind === 'ConfigMap');
    expect(rule?.spec?.groups).toEqual((parse(readFileSync(ALERTS, 'utf8')) as { groups: unknown }).groups);
    expect(JSON.parse(cm?.data?.['codemode-operator.json'] ?? '')).toEqual(JSON.parse(readFileSync(DASHBOARD, 'utf8')));
  });
});
