// values.schema.json and the README's Helm values table, both from values.yaml itself: every
// value's description is its `# --` comment, its type comes from its default (plus the few
// constraints below), and `config.*` takes the gateway's own field schemas. A value without a
// description fails generation, so nothing reaches users undocumented.
import { isMap, isScalar, isSeq, parseDocument, type Node, type YAMLMap } from 'yaml';
import type { ChartConfigField } from './config.js';

type Schema = Record<string, unknown>;

/** Maps whose keys are the user's (labels, annotations, quota names, resources, profile names). */
const FREE_FORM = new Set(['sandboxNamespace.labels', 'quota.hard', 'resources', 'profiles']);

/** Constraints a default value cannot express. */
const EXTRA: Record<string, Schema> = {
  replicaCount: { minimum: 1 },
  'image.pullPolicy': { enum: ['Always', 'IfNotPresent', 'Never'] },
  'image.tag': { type: ['string', 'number'] },
  'service.type': { enum: ['ClusterIP', 'NodePort', 'LoadBalancer'] },
  'service.port': { minimum: 1, maximum: 65535 },
  terminationGracePeriodSeconds: { type: ['integer', 'null'], minimum: 1 },
  preStopSleepSeconds: { minimum: 0, maximum: 120 },
  'podDisruptionBudget.maxUnavailable': { type: ['integer', 'string'] },
  'ingress.hosts': { items: { type: 'string' } },
  'httpRoute.hostnames': { items: { type: 'string' } },
  'ownerPolicy.adminGroups': { items: { type: 'string', minLength: 1 } },
  'networkPolicy.apiServer.cidrs': { items: { type: 'string' } },
  'networkPolicy.apiServer.ports': { items: { type: 'integer', minimum: 1, maximum: 65535 } },
  extraEnv: {
    items: {
      type: 'object',
      required: ['name'],
      properties: { name: { type: 'string', minLength: 1 } },
    },
  },
  'upstreams.secretNames': { items: { type: 'string', pattern: '^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$' } },
};

export interface ValueRow {
  path: string;
  default: unknown;
  description: string;
}

/** The text of a `# -- ...` comment (helm-docs style), joined into one line. */
export function describe(comment: string | undefined | null): string | undefined {
  if (!comment) return undefined;
  const lines = comment.split('\n').map((l) => l.trim());
  const start = lines.findLastIndex((l) => l.startsWith('-- '));
  if (start < 0) return undefined;
  return lines.slice(start).join(' ').slice(3).trim();
}

function typeOf(value: unknown): Schema {
  if (value === null) return {};
  if (Array.isArray(value)) return { type: 'array' };
  if (typeof value === 'number') return { type: Number.isInteger(value) ? 'integer' : 'number' };
  if (typeof value === 'object') return { type: 'object' };
  return { type: typeof value };
}

interface Walk {
  rows: ValueRow[];
  config: ChartConfigField[];
}

function walkMap(map: YAMLMap, prefix: string, w: Walk): Schema {
  const properties: Record<string, Schema> = {};
  map.items.forEach((pair, i) => {
    const key = String(isScalar(pair.key) ? pair.key.value : pair.key);
    const path = prefix ? `${prefix}.${key}` : key;
    const value = pair.value as Node | null;
    const comment = (pair.key as Node).commentBefore ?? (i === 0 ? map.commentBefore : undefined);
    const description = describe(comment);
    const js: unknown = value && 'toJSON' in value ? value.toJSON() : null;
    if (path === 'config') {
      properties[key] = configSchema(w.config, description);
      for (const f of w.config.filter((c) => c.inValues)) w.rows.push({ path: `config.${f.key}`, default: f.default, description: f.description });
      return;
    }
    if (isMap(value) && value.items.length > 0 && !FREE_FORM.has(path)) {
      properties[key] = { ...(description && { description }), ...walkMap(value, path, w) };
      return;
    }
    if (!description) throw new Error(`values.yaml: ${path} has no "# -- description" comment`);
    properties[key] = { description, ...typeOf(js), ...(isSeq(value) && { items: {} }), ...EXTRA[path] };
    w.rows.push({ path, default: js, description });
  });
  return { type: 'object', additionalProperties: false, properties };
}

function configSchema(fields: ChartConfigField[], description: string | undefined): Schema {
  const properties = Object.fromEntries(fields.filter((f) => f.inValues).map((f) => [f.key, f.schema]));
  return { ...(description && { description }), type: 'object', additionalProperties: false, properties };
}

export function analyseValues(valuesYaml: string, config: ChartConfigField[]): { schema: Schema; rows: ValueRow[] } {
  const doc = parseDocument(valuesYaml);
  if (!isMap(doc.contents)) throw new Error('values.yaml is not a map');
  const w: Walk = { rows: [], config };
  const schema = { $schema: 'http://json-schema.org/draft-07/schema#', title: 'codemode-operator values', ...walkMap(doc.contents, '', w) };
  return { schema, rows: w.rows };
}

function cell(s: string): string {
  return s.replaceAll('|', '\\|');
}

export function valuesTableMarkdown(rows: ValueRow[]): string {
  const lines = ['| Value | Default | Description |', '| --- | --- | --- |'];
  for (const r of rows) lines.push(`| \`${r.path}\` | \`${cell(JSON.stringify(r.default))}\` | ${cell(r.description)} |`);
  return lines.join('\n');
}
