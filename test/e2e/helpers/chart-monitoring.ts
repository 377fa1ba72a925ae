// What the chart ships for monitoring, read from its one source files: the Grafana dashboard's
// panel queries (dashboards/codemode.json) and the alert rules (rules/alerts.yaml).
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

export const DASHBOARD = 'charts/codemode-operator/dashboards/codemode.json';
export const ALERTS = 'charts/codemode-operator/rules/alerts.yaml';
export const ALERT_TESTS = 'charts/codemode-operator/rules/alerts.test.yaml';

export interface Panel {
  type: string;
  title: string;
  id: number;
  description?: string;
  targets?: Array<{ expr: string; refId: string }>;
  fieldConfig?: {
    defaults?: { unit?: string };
    overrides?: Array<{ matcher: { id: string; options: string }; properties: Array<{ id: string; value: unknown }> }>;
  };
  panels?: Panel[];
}

/** The unit a panel draws one of its queries in: an override for its refId, else the panel's. */
export function unitOf(p: Panel, refId: string): string | undefined {
  const o = p.fieldConfig?.overrides?.find((x) => x.matcher.id === 'byFrameRefID' && x.matcher.options === refId);
  const unit = o?.properties.find((x) => x.id === 'unit')?.value;
  return typeof unit === 'string' ? unit : p.fieldConfig?.defaults?.unit;
}

export interface Dashboard {
  uid: string;
  panels: Panel[];
  templating: { list: Array<{ name: string }> };
}

export function dashboard(): Dashboard {
  return JSON.parse(readFileSync(DASHBOARD, 'utf8')) as Dashboard;
}

/** Every query of every panel (rows' nested panels included), named "panel title / refId". */
export function panelQueries(d: Dashboard = dashboard()): Array<{ name: string; expr: string }> {
  const all = d.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
  return all.flatMap((p) => (p.targets ?? []).map((t) => ({ name: `${p.title} / ${t.refId}`, expr: t.expr })));
}

export interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export function alertRules(): AlertRule[] {
  const file = parse(readFileSync(ALERTS, 'utf8')) as { groups: Array<{ name: string; rules: AlertRule[] }> };
  return file.groups.flatMap((g) => g.rules);
}

/**
 * A panel query as Grafana would send it: its variables replaced by fixed values. `rate` stands
 * for $__rate_interval (and $__interval), `job` for the job variable.
 */
export function substitute(expr: string, vars: { rate: string; job: string }): string {
  return expr.replaceAll('$__rate_interval', vars.rate).replaceAll('$__interval', vars.rate).replaceAll('$job', vars.job).replaceAll('${job}', vars.job);
}

/** Metric names a PromQL expression reads (ours and the standard families we export). */
export function metricNames(expr: string): string[] {
  const names = expr.match(/\b(?:codemode|controller_runtime|workqueue|leader_election|process|nodejs)_[a-z_]+\b/g) ?? [];
  return [...new Set(names.map((n) => n.replace(/_(bucket|count|sum)$/, '')))];
}
