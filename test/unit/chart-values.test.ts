// The chart's config values are generated from src/config/fields.ts: every field reaches the env
// template and values.yaml, the chart's defaults are a valid gateway configuration, and the
// schema/table generator documents every value.
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { FIELDS } from '../../src/config/fields.js';
import { loadConfig } from '../../src/config/index.js';
import { CHART_READS, chartConfigFields, kindOf, renderEnvTemplate, valueSchema } from '../../scripts/chart/config.js';
import { analyseValues, describe as describeComment, valuesTableMarkdown } from '../../scripts/chart/values-schema.js';

const CHART = 'charts/codemode-operator';
const valuesText = readFileSync(`${CHART}/values.yaml`, 'utf8');
const values = parse(valuesText) as { config: Record<string, unknown> };
const fields = chartConfigFields();

describe('chart config generated from src/config/fields.ts', () => {
  it('maps every field to env exactly once, in the committed template', () => {
    const tpl = readFileSync(`${CHART}/templates/_config-env.tpl`, 'utf8');
    expect(tpl).toBe(renderEnvTemplate(fields));
    for (const f of Object.values(FIELDS)) expect(tpl.split(`- name: ${f.doc.env}\n`).length - 1).toBe(1);
  });

  it('has a values.yaml entry for every field the chart does not derive', () => {
    expect(Object.keys(values.config).sort()).toEqual(
      fields
        .filter((f) => f.inValues)
        .map((f) => f.key)
        .sort(),
    );
    expect(Object.keys(values.config)).not.toContain('namespace');
  });

  it('defaults to a configuration the gateway accepts', () => {
    // As the env template renders them: lists joined with commas, everything as a string.
    const env = Object.fromEntries(
      fields
        .filter((f) => f.inValues)
        .map((f) => {
          const v = values.config[f.key];
          return [f.env, Array.isArray(v) ? v.join(',') : String(v)];
        }),
    );
    const config = loadConfig({ ...env, CODEMODE_NAMESPACE: 'codemode-sandboxes' });
    expect(config.bindAddress).toBe('0.0.0.0');
    expect(config.maxTimeoutSeconds).toBe(values.config.maxTimeoutSeconds);
  });

  it('commits values.schema.json as generated from values.yaml', () => {
    const { schema } = analyseValues(valuesText, fields);
    expect(JSON.parse(readFileSync(`${CHART}/values.schema.json`, 'utf8'))).toEqual(schema);
  });

  it.each([
    ['port', 'integer'],
    ['maxTimeoutSeconds', 'integer'],
    ['allowedHosts', 'list'],
    ['allowedOrigins', 'list'],
    ['logLevel', 'string'],
    ['maxMemory', 'string'],
    ['imagePython', 'string'],
  ] as const)('kindOf(%s) is %s', (key, kind) => {
    expect(kindOf(FIELDS[key].schema as z.ZodType)).toBe(kind);
  });

  it.each([
    ['maxTimeoutSeconds', 600, true],
    ['maxTimeoutSeconds', '600', true],
    ['maxTimeoutSeconds', 'ten', false],
    ['allowedHosts', ['a.example.com'], true],
    ['allowedHosts', 'a.example.com,b', true],
    ['logLevel', 'debug', true],
    ['logLevel', 'loud', false],
    ['imagePython', '', true],
    ['imagePython', 'registry.example.com/py:1', true],
    // A number in the field's own range, as the gateway checks it at start.
    ['maxTimeoutSeconds', 3600, true],
    ['maxTimeoutSeconds', 7200, false],
    ['maxConcurrentRuns', 0, false],
    ['maxConcurrentRuns', '', true],
    // Values the templates read: never blank, and a port a container can have.
    ['maxTimeoutSeconds', '', false],
    ['port', 0, false],
    ['port', '', false],
    ['port', 8080, true],
    ['bindAddress', '', false],
    ['authTokensSecret', '', false],
    ['authTokensSecret', 'team-tokens', true],
  ] as const)('the schema of config.%s accepts %j: %s', (key, value, ok) => {
    const f = FIELDS[key];
    const schema = valueSchema(f.schema as z.ZodType, kindOf(f.schema as z.ZodType), 'd', CHART_READS[key]);
    expect(z.fromJSONSchema(schema).safeParse(value).success).toBe(ok);
  });
});

describe('values documentation', () => {
  it.each([
    [' -- One line.', 'One line.'],
    [' header\n\n -- First\n second.', 'First second.'],
    [' no marker', undefined],
    [undefined, undefined],
  ])('describe(%j) is %j', (comment, want) => {
    expect(describeComment(comment)).toBe(want);
  });

  it('refuses a value without a description', () => {
    expect(() => analyseValues('# -- documented\na: 1\nb: 2\n', [])).toThrow(/b has no "# -- description"/);
  });

  it('types values from their defaults and lists leaves in the table', () => {
    const { schema, rows } = analyseValues('# -- n\nn: 1\nm:\n  # -- s\n  s: x\n  # -- l\n  l: []\n', []);
    expect(schema).toMatchObject({
      properties: { n: { type: 'integer' }, m: { type: 'object', properties: { s: { type: 'string' }, l: { type: 'array' } } } },
    });
    expect(valuesTableMarkdown(rows)).toContain('| `m.s` | `"x"` | s |');
  });
});
