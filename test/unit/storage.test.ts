// The size of a stored SandboxRun at the largest configuration the API and the config allow:
// whatever a creator puts in code and stdin, the status the controller writes keeps the object
// inside etcd's request limit, or the object could never have been stored in the first place.
import { describe, expect, it } from 'vitest';
import {
  ETCD_REQUEST_LIMIT_BYTES,
  MAX_CODE_BYTES_HARD,
  MAX_OUTPUT_BYTES_HARD,
  MAX_STDIN_BYTES,
  MAX_TIMEOUT_SECONDS_HARD,
  MAX_TTL_SECONDS_AFTER_FINISHED,
  OBJECT_BUDGET_BYTES,
  Reasons,
  buildSandboxRunCrd,
  buildSandboxSessionCrd,
  fitStatus,
  jsonSize,
  jsonStringSize,
  minimalStatus,
  prefixWithinJson,
  prefixWithinUtf8,
  type JsonSchema,
  type SandboxRun,
} from '../../src/api/v1alpha1/index.js';
import { completedStatus } from '../../src/runs/status.js';

/** `bytes` UTF-8 bytes of one repeated character (rounded down to whole characters). */
function fill(ch: string, bytes: number): string {
  return ch.repeat(Math.floor(bytes / Buffer.byteLength(ch, 'utf8')));
}

const KINDS: Array<[string, string]> = [
  ['ASCII', 'a'],
  ['CJK (3 bytes)', '漢'],
  ['emoji (4 bytes)', '😀'],
  ['newlines (2 in JSON)', '\n'],
  ['< (6 in JSON: \\u003c)', '<'],
  ['control characters (6 in JSON)', '\u0001'],
];

/** A run at every bound the API allows, with metadata as the API server and our writers leave it. */
function maxRun(ch: string, codeBytes = MAX_CODE_BYTES_HARD, stdinBytes = MAX_STDIN_BYTES): SandboxRun {
  const field = (n: number) => 'f:x'.repeat(n);
  return {
    apiVersion: 'codemode.dev/v1alpha1',
    kind: 'SandboxRun',
    metadata: {
      name: 'r'.repeat(253),
      namespace: 'n'.repeat(63),
      uid: '0f0f0f0f-0f0f-0f0f-0f0f-0f0f0f0f0f0f',
      generation: 1,
      resourceVersion: '123456789012',
      creationTimestamp: '2026-11-23T17:00:00Z',
      labels: { 'app.kubernetes.io/managed-by': 'codemode-operator' },
      annotations: { 'codemode.dev/executor': 'e'.repeat(63) },
      // Three managers (creator, executor claim, status writer): their field lists.
      managedFields: [1, 2, 3].map((i) => ({
        manager: `m${i}`,
        operation: 'Update',
        apiVersion: 'codemode.dev/v1alpha1',
        time: '2026-11-23T17:00:00Z',
        fieldsType: 'FieldsV1',
        fieldsV1: { [field(40)]: {} },
      })),
    },
    spec: {
      language: 'javascript',
      code: fill(ch, codeBytes) || 'x',
      stdin: fill(ch, stdinBytes),
      timeoutSeconds: MAX_TIMEOUT_SECONDS_HARD,
      resources: { cpu: '9'.repeat(64), memory: '9'.repeat(64) },
      session: 's'.repeat(253),
      ttlSecondsAfterFinished: MAX_TTL_SECONDS_AFTER_FINISHED,
    },
  };
}

function finalStatus(run: SandboxRun, ch: string) {
  const out = fill(ch, MAX_OUTPUT_BYTES_HARD);
  return completedStatus(
    run,
    { phase: 'Failed', reason: Reasons.NonZeroExit, exitCode: 1, message: 'The program exited with code 1; see stderr.' },
    { stdout: out, stderr: out, stdoutBytes: 10 ** 12, stderrBytes: 10 ** 12, truncated: true },
    { start: new Date('2026-11-23T17:00:00Z'), end: new Date('2026-11-23T18:00:00Z') },
  );
}

describe('the worst-case stored SandboxRun', () => {
  it.each(KINDS)('%s: fits etcd at the maximum configuration, or cannot be created at all', (_kind, ch) => {
    const run = maxRun(ch);
    const specOnly = jsonSize(run);
    if (specOnly > ETCD_REQUEST_LIMIT_BYTES) {
      // The API server cannot store this spec: creating it fails, no status is ever needed.
      expect(jsonSize({ ...run, spec: { ...run.spec, stdin: '' } })).toBeGreaterThan(0);
      return;
    }
    const status = fitStatus(run, finalStatus(run, ch), MAX_OUTPUT_BYTES_HARD);
    const stored = jsonSize({ ...run, status });
    expect(stored).toBeLessThanOrEqual(OBJECT_BUDGET_BYTES);
    expect(stored).toBeLessThan(ETCD_REQUEST_LIMIT_BYTES);
    expect(status.phase).toBe('Failed');
  });

  it('keeps every byte of plain output at the maximum configuration (1 MiB of text is not cut)', () => {
    const run = maxRun('a');
    const status = fitStatus(run, finalStatus(run, 'a'), MAX_OUTPUT_BYTES_HARD);
    expect(Buffer.byteLength(status.stdout ?? '')).toBe(MAX_OUTPUT_BYTES_HARD);
    expect(Buffer.byteLength(status.stderr ?? '')).toBe(MAX_OUTPUT_BYTES_HARD);
    // Margin left for managedFields growth and the etcd request's framing.
    expect(ETCD_REQUEST_LIMIT_BYTES - jsonSize({ ...run, status })).toBeGreaterThan(256 * 1024);
  });

  it.each([
    ['spec at the budget', OBJECT_BUDGET_BYTES],
    ["spec 4 KiB under etcd's limit", ETCD_REQUEST_LIMIT_BYTES - 4096],
  ])('an object already near the limit (%s) still takes a minimal terminal status', (_n, target) => {
    // Pad code with '<' (6 bytes each in JSON) until the spec alone is ~target bytes.
    const base = maxRun('a', 1, 0);
    const pad = Math.floor((target - jsonSize(base)) / 6);
    const run = { ...base, spec: { ...base.spec, code: '<'.repeat(pad) } };
    const status = fitStatus(run, finalStatus(run, 'a'), MAX_OUTPUT_BYTES_HARD);
    expect(status).toMatchObject({ phase: 'Failed', reason: Reasons.NonZeroExit, truncated: true, stdout: null });
    expect(jsonSize({ ...run, status })).toBeLessThan(ETCD_REQUEST_LIMIT_BYTES);
  });

  it('a minimal status is small whatever the message', () => {
    const s = minimalStatus({
      phase: 'Failed',
      reason: 'X'.repeat(1024),
      message: '<'.repeat(32768),
      completionTime: '2026-11-23T18:00:00Z',
      observedGeneration: 1,
      exitCode: 1,
    });
    expect(jsonSize(s)).toBeLessThan(16 * 1024);
  });

  it.each<[string, Parameters<typeof minimalStatus>[0], boolean]>([
    [
      'a finished run',
      { phase: 'Failed', reason: Reasons.NonZeroExit, message: 'exit 1', completionTime: '2026-11-23T18:00:00Z', observedGeneration: 2 },
      true,
    ],
    ['a finished run without its completion time', { phase: 'Succeeded', reason: Reasons.Succeeded, message: 'ok' }, false],
    ['a run not finished', { phase: 'Running', reason: Reasons.PodRunning, completionTime: '2026-11-23T18:00:00Z' }, false],
  ])('a minimal status of %s keeps the finishing conditions (kubectl wait --for=condition=Complete ends)', (_what, status, finished) => {
    const s = minimalStatus(status);
    if (!finished) return expect(s.conditions).toBeNull();
    expect(s.conditions?.map((c) => [c.type, c.status, c.reason, c.lastTransitionTime, c.observedGeneration])).toEqual([
      ['Complete', 'True', Reasons.NonZeroExit, '2026-11-23T18:00:00.000Z', 2],
      ['Ready', 'False', Reasons.NonZeroExit, '2026-11-23T18:00:00.000Z', 2],
    ]);
    expect(s.conditions?.[0]?.message).toBe(s.message);
  });

  it.each<[string, number, number | undefined]>([
    ['a process exit status', 1, 1],
    ['a signal-style negative code', -9, -9],
    ['the largest 32-bit code', 2 ** 32 - 1, 2 ** 32 - 1],
    ['a code past 32 bits (came from the sandbox)', 2 ** 32, undefined],
    ['a code past int64 (refused by the API server)', 1e20, undefined],
    ['a fraction', 1.5, undefined],
  ])('a minimal status keeps %s only if it is a 32-bit integer', (_what, exitCode, kept) => {
    expect(minimalStatus({ phase: 'Failed', reason: Reasons.NonZeroExit, exitCode }).exitCode).toBe(kept);
  });
});

describe('CRD bounds', () => {
  /** Every schema node with its path. */
  function walk(node: JsonSchema, path = '$'): Array<[string, JsonSchema]> {
    const out: Array<[string, JsonSchema]> = [[path, node]];
    for (const [name, child] of Object.entries((node.properties as Record<string, JsonSchema>) ?? {})) out.push(...walk(child, `${path}.${name}`));
    if (node.items) out.push(...walk(node.items as JsonSchema, `${path}[]`));
    return out;
  }
  const crds = [buildSandboxRunCrd(), buildSandboxSessionCrd()];

  it.each(crds.map((c) => [c.metadata.name, c] as const))('%s bounds every string and list', (_name, crd) => {
    const root = crd.spec.versions[0]!.schema.openAPIV3Schema;
    const unbounded = walk(root)
      .filter(([path]) => path !== '$.properties' && !path.startsWith('$.metadata'))
      .filter(([path]) => path !== '$.apiVersion' && path !== '$.kind')
      // A date-time is bounded by its format, which the API server checks (conditions.ts has no maxLength).
      .filter(
        ([, n]) =>
          (n.type === 'string' && n.maxLength === undefined && n.enum === undefined && n.format !== 'date-time') ||
          (n.type === 'array' && n.maxItems === undefined),
      )
      .map(([p]) => p);
    expect(unbounded).toEqual([]);
  });

  it.each(['code', 'stdin'])('spec.%s is bounded in bytes by the API server (CEL)', (name) => {
    const spec = buildSandboxRunCrd().spec.versions[0]!.schema.openAPIV3Schema.properties as Record<string, JsonSchema>;
    const node = (spec.spec!.properties as Record<string, JsonSchema>)[name]!;
    expect(node['x-kubernetes-validations']).toEqual([{ rule: 'size(bytes(self)) <= 262144', message: 'must be at most 262144 bytes (UTF-8)' }]);
  });
});

describe('JSON size model', () => {
  it.each<[string, number]>([
    ['', 2],
    ['abc', 5],
    ['"\\', 6],
    ['\n\t\r', 8],
    ['<>&', 20],
    ['\u0000', 8],
    ['é', 4],
    ['漢', 5],
    ['😀', 6],
    ['\u2028', 8],
    ['\ud800', 5],
  ])('%j → %d bytes', (s, n) => {
    expect(jsonStringSize(s)).toBe(n);
  });

  it.each(KINDS)('is never below what JSON.stringify writes (%s)', (_k, ch) => {
    const v = { a: [1, true, null, `x${ch}y`.repeat(50)], b: { c: ch } };
    expect(jsonSize(v)).toBeGreaterThanOrEqual(Buffer.byteLength(JSON.stringify(v)));
  });

  it.each<[string, number, string]>([
    ['abcdef', 5, 'abc'],
    ['a<b', 8, 'a'],
    ['😀😀', 6, '😀'],
    ['😀😀', 5, ''],
  ])('prefixWithinJson(%j, %d) = %j', (s, max, want) => {
    expect(prefixWithinJson(s, max)).toBe(want);
  });

  it.each<[string, number, string]>([
    ['abc', 2, 'ab'],
    ['é', 1, ''],
    ['aé', 2, 'a'],
    ['😀x', 4, '😀'],
    ['😀x', 3, ''],
    ['plain', 100, 'plain'],
  ])('prefixWithinUtf8(%j, %d) = %j', (s, max, want) => {
    expect(prefixWithinUtf8(s, max)).toBe(want);
  });

  it('cuts outputs to the byte cap at a character boundary and says so', () => {
    const run = maxRun('a', 10, 0);
    const s = fitStatus(run, { phase: 'Succeeded', stdout: 'é'.repeat(10), stderr: 'ok' }, 5);
    expect(s).toMatchObject({ stdout: 'éé', stderr: 'ok', truncated: true });
    expect(fitStatus(run, { phase: 'Succeeded', stdout: 'short' }, 5)).toEqual({ phase: 'Succeeded', stdout: 'short' });
  });
});
