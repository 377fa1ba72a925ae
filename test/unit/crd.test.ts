import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { renderCrdYaml } from '../../src/api/v1alpha1/crd-yaml.js';
import { CRD_FILE_HEADER, buildSandboxRunCrd, buildSandboxSessionCrd, toStructural } from '../../src/api/v1alpha1/index.js';
import type { JsonSchema } from '../../src/api/v1alpha1/index.js';

const crd = buildSandboxRunCrd();
const version = crd.spec.versions[0]!;
const root = version.schema.openAPIV3Schema;
const props = (node: JsonSchema): Record<string, JsonSchema> => node.properties as Record<string, JsonSchema>;
const spec = props(root).spec!;
const status = props(root).status!;

/** Every schema node with its path, depth first. */
function walk(node: JsonSchema, path = '$'): Array<[string, JsonSchema]> {
  const out: Array<[string, JsonSchema]> = [[path, node]];
  for (const [name, child] of Object.entries(props(node) ?? {})) out.push(...walk(child, `${path}.${name}`));
  if (node.items) out.push(...walk(node.items as JsonSchema, `${path}[]`));
  return out;
}

describe('SandboxRun CRD', () => {
  it('names the resource', () => {
    expect(crd.metadata.name).toBe('sandboxruns.codemode.dev');
    expect(crd.spec.group).toBe('codemode.dev');
    expect(crd.spec.scope).toBe('Namespaced');
    expect(crd.spec.names).toEqual({
      kind: 'SandboxRun',
      listKind: 'SandboxRunList',
      plural: 'sandboxruns',
      singular: 'sandboxrun',
      shortNames: ['sbr'],
      categories: ['codemode'],
    });
    expect(version).toMatchObject({ name: 'v1alpha1', served: true, storage: true, subresources: { status: {} } });
  });

  it('has the standard top level', () => {
    expect(Object.keys(props(root))).toEqual(['apiVersion', 'kind', 'metadata', 'spec', 'status']);
    expect(props(root).metadata).toEqual({ type: 'object' });
    expect(root.required).toEqual(['spec']);
  });

  it.each<[string, JsonSchema]>([
    ['language', { type: 'string', default: 'python', enum: ['python', 'bash', 'sh', 'node', 'javascript'] }],
    ['code', { type: 'string', minLength: 1, maxLength: 262144 }],
    ['timeoutSeconds', { type: 'integer', default: 30, minimum: 1, maximum: 3600 }],
    ['stdin', { type: 'string', maxLength: 262144 }],
    ['ttlSecondsAfterFinished', { type: 'integer', minimum: 0, maximum: 604800 }],
  ])('spec.%s carries its enum, default and bounds', (name, expected) => {
    expect(props(spec)[name]).toMatchObject(expected);
  });

  it('requires only the code (defaults fill the rest)', () => {
    expect(spec.required).toEqual(['code']);
  });

  it('validates resource quantities with an RE2-safe pattern', () => {
    const resources = props(props(spec).resources!);
    for (const q of [resources.cpu!, resources.memory!]) {
      expect(q.type).toBe('string');
      // No lookarounds or backreferences: RE2 (the API server) cannot run them.
      expect(String(q.pattern)).not.toMatch(/\(\?[=!<]|\\[1-9]/);
    }
  });

  it('drops the ±2^53 bounds of .int()', () => {
    expect(props(status).exitCode).toEqual({ type: 'integer', description: expect.any(String) });
    expect(JSON.stringify(crd)).not.toContain(String(Number.MAX_SAFE_INTEGER));
  });

  it('marks conditions as a map list keyed by type', () => {
    const conditions = props(status).conditions!;
    expect(conditions['x-kubernetes-list-type']).toBe('map');
    expect(conditions['x-kubernetes-list-map-keys']).toEqual(['type']);
    expect((conditions.items as JsonSchema).required).toContain('type');
  });

  it('types timestamps as date-time without zod pattern', () => {
    for (const name of ['startTime', 'completionTime']) {
      expect(props(status)[name]).toEqual({ type: 'string', maxLength: 64, format: 'date-time', description: expect.any(String) });
    }
  });

  it.each([
    ['spec', spec],
    ['status', status],
  ])('describes every property in %s (kubectl explain)', (_name, node) => {
    const undescribed = walk(node).filter(([path, n]) => path !== '$' && typeof n.description !== 'string');
    expect(undescribed.map(([path]) => path)).toEqual([]);
  });

  it('is structural: every node typed, no refs, no combinators, no additionalProperties: false', () => {
    for (const [path, node] of walk(root)) {
      expect(node.type, path).toBeTypeOf('string');
    }
    const text = JSON.stringify(crd);
    for (const forbidden of ['"additionalProperties":false', '"$ref"', '"$schema"', '"anyOf"', '"oneOf"', '"allOf"']) {
      expect(text).not.toContain(forbidden);
    }
  });

  it('has readable printer columns', () => {
    expect(version.additionalPrinterColumns.map((c) => [c.name, c.type, c.jsonPath])).toEqual([
      ['Phase', 'string', '.status.phase'],
      ['Language', 'string', '.spec.language'],
      ['Owner', 'string', '.spec.owner.user'],
      ['Exit', 'integer', '.status.exitCode'],
      ['Duration(ms)', 'integer', '.status.durationMs'],
      ['Reason', 'string', '.status.reason'],
      ['Pod', 'string', '.status.podName'],
      ['Session', 'string', '.spec.session'],
      ['Age', 'date', '.metadata.creationTimestamp'],
    ]);
  });
});

// A session's pod is made from its profile, and install_packages reads the policy of the
// profile spec.profile names at that moment: an owner (who may edit the spec) switching it would
// install into the pod under another profile's policy. The API server keeps it (a transition rule;
// test/e2e/owner-policy.test.ts shows it refusing the edit).
describe('SandboxSession CRD', () => {
  const sessionSpec = (buildSandboxSessionCrd().spec.versions[0]!.schema.openAPIV3Schema.properties as Record<string, JsonSchema>).spec!;

  // A Failed or Lost session says why with -o wide, as a SandboxRun does.
  it('has readable printer columns, its reason among the wide ones', () => {
    const columns = buildSandboxSessionCrd().spec.versions[0]!.additionalPrinterColumns ?? [];
    expect(columns.map((c) => [c.name, c.jsonPath, c.priority ?? 0])).toEqual([
      ['Phase', '.status.phase', 0],
      ['Language', '.spec.language', 0],
      ['Owner', '.spec.owner.user', 0],
      ['Runs', '.status.runCount', 0],
      ['Last-Activity', '.status.lastActivityTime', 0],
      ['Reason', '.status.reason', 1],
      ['Expires', '.status.expiresAt', 1],
      ['Pod', '.status.podName', 1],
      ['Age', '.metadata.creationTimestamp', 0],
    ]);
  });
  const rules = (sessionSpec['x-kubernetes-validations'] ?? []) as Array<{ rule: string; message: string }>;

  it.each([
    ['changed', /self\.profile == oldSelf\.profile/],
    ['added or removed', /has\(self\.profile\) == has\(oldSelf\.profile\)/],
  ])('refuses spec.profile %s after creation', (_name, rule) => {
    const found = rules.find((r) => rule.test(r.rule));
    expect(found?.message).toMatch(/spec\.profile cannot be changed/);
  });

  it('leaves the rest of the spec editable (install_packages appends to spec.packages)', () => {
    expect(rules.map((r) => r.rule).join(' ')).not.toMatch(/self == oldSelf|packages|language|idleTimeoutSeconds/);
  });
});

describe('toStructural', () => {
  it.each<[string, JsonSchema, JsonSchema]>([
    ['drops additionalProperties: false', { type: 'object', additionalProperties: false }, { type: 'object' }],
    ['turns {} into preserve-unknown-fields', { type: 'object', additionalProperties: {} }, { type: 'object', 'x-kubernetes-preserve-unknown-fields': true }],
    ['drops $schema', { $schema: 'x', type: 'string' }, { type: 'string' }],
    ['keeps real integer bounds', { type: 'integer', minimum: Number.MIN_SAFE_INTEGER, maximum: 10 }, { type: 'integer', maximum: 10 }],
  ])('%s', (_name, input, expected) => {
    expect(toStructural(input)).toEqual(expected);
  });

  it.each([
    [{ anyOf: [{ type: 'string' }, { type: 'integer' }] }, /anyOf/],
    [{ $ref: '#/x' }, /\$ref/],
    [{ type: 'object', properties: { a: { description: 'untyped' } } }, /\$\.a has no type/],
  ])('rejects what Kubernetes cannot express: %j', (input, message) => {
    expect(() => toStructural(input)).toThrow(message);
  });
});

describe('crds/codemode.dev_sandboxruns.yaml', () => {
  const path = fileURLToPath(new URL('../../crds/codemode.dev_sandboxruns.yaml', import.meta.url));
  const onDisk = readFileSync(path, 'utf8');

  it('equals a fresh generation (run `npm run gen:crds` after changing src/api)', () => {
    expect(onDisk).toBe(renderCrdYaml(buildSandboxRunCrd()));
  });

  it('starts with the DO-NOT-EDIT header and parses back to the CRD', () => {
    expect(onDisk.split('\n')[0]).toBe(CRD_FILE_HEADER);
    expect(parse(onDisk)).toEqual(crd);
  });
});
