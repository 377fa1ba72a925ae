import { describe, expect, it } from 'vitest';
import {
  API_VERSION,
  MAX_TOOL_CALL_SERVERS,
  SandboxRunStatusSchema,
  toolCallsStatus,
  CONDITION_COMPLETE,
  CONDITION_READY,
  GROUP,
  LanguageSchema,
  MAX_CODE_BYTES_HARD,
  Reasons,
  RunPhaseSchema,
  SANDBOXRUN_KIND,
  SANDBOXRUN_PLURAL,
  VERSION,
  buildSandboxRunCrd,
  isTerminalPhase,
  normalizeLanguage,
  parseSandboxRun,
} from '../../src/api/v1alpha1/index.js';
import type { JsonSchema, Language, RunPhase } from '../../src/api/v1alpha1/index.js';

function run(spec: Record<string, unknown>, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    apiVersion: API_VERSION,
    kind: SANDBOXRUN_KIND,
    metadata: { name: 'run-abc', namespace: 'codemode', uid: 'u-1' },
    spec,
    ...extra,
  };
}

describe('constants', () => {
  it('names the API group and kind', () => {
    expect([GROUP, VERSION, API_VERSION, SANDBOXRUN_KIND, SANDBOXRUN_PLURAL]).toEqual([
      'codemode.dev',
      'v1alpha1',
      'codemode.dev/v1alpha1',
      'SandboxRun',
      'sandboxruns',
    ]);
    expect(MAX_CODE_BYTES_HARD).toBe(262144);
    expect([CONDITION_READY, CONDITION_COMPLETE]).toEqual(['Ready', 'Complete']);
  });

  it('declares unique CamelCase reasons', () => {
    const values = Object.values(Reasons);
    expect(new Set(values).size).toBe(values.length);
    for (const v of values) expect(v).toMatch(/^[A-Z][A-Za-z]+$/);
    expect(Reasons.TimedOut).toBe('DeadlineExceeded');
  });
});

describe('normalizeLanguage', () => {
  it.each<[Language, string]>([
    ['python', 'python'],
    ['bash', 'bash'],
    ['sh', 'sh'],
    ['node', 'node'],
    ['javascript', 'node'],
  ])('%s runs as %s', (language, runtime) => {
    expect(normalizeLanguage(language)).toBe(runtime);
  });

  it('covers every language', () => {
    expect(LanguageSchema.options).toHaveLength(5);
  });
});

describe('isTerminalPhase', () => {
  it.each<[RunPhase | undefined, boolean]>([
    [undefined, false],
    ['Pending', false],
    ['Running', false],
    ['Succeeded', true],
    ['Failed', true],
    ['TimedOut', true],
  ])('%s → %s', (phase, terminal) => {
    expect(isTerminalPhase(phase)).toBe(terminal);
  });

  it('knows every phase', () => {
    expect(RunPhaseSchema.options).toEqual(['Pending', 'Running', 'Succeeded', 'Failed', 'TimedOut']);
  });
});

describe('parseSandboxRun', () => {
  it('applies defaults', () => {
    const result = parseSandboxRun(run({ code: 'print(1)' }));
    expect(result).toEqual({
      ok: true,
      run: expect.objectContaining({ spec: { code: 'print(1)', language: 'python', timeoutSeconds: 30 } }),
    });
  });

  it('keeps unknown metadata fields and a full status', () => {
    const status = {
      phase: 'Succeeded',
      conditions: [{ type: 'Complete', status: 'True', reason: 'Succeeded', message: '', lastTransitionTime: '2026-01-02T03:04:05Z' }],
      exitCode: 0,
      stdout: 'hi\n',
      stdoutBytes: 3,
      truncated: false,
      startTime: '2026-01-02T03:04:04+01:00',
      durationMs: 12,
    };
    const obj = run({ code: 'x', language: 'node' }, { status });
    (obj.metadata as Record<string, unknown>).managedFields = [{ manager: 'kubectl' }];
    const result = parseSandboxRun(obj);
    if (!result.ok) throw new Error(result.message);
    expect(result.run.status).toEqual(status);
    expect(result.run.metadata).toHaveProperty('managedFields');
  });

  it('counts code size in UTF-8 bytes', () => {
    const fits = 'é'.repeat(MAX_CODE_BYTES_HARD / 2);
    expect(parseSandboxRun(run({ code: fits })).ok).toBe(true);
    const result = parseSandboxRun(run({ code: `${fits}é` }));
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.message).toContain(`spec.code must be at most ${MAX_CODE_BYTES_HARD} bytes`);
  });

  it.each<[string, Record<string, unknown>, string]>([
    ['empty code', { code: '' }, 'spec.code must not be empty'],
    ['missing code', {}, 'spec.code is required (a string)'],
    ['unknown language', { code: 'x', language: 'ruby' }, 'spec.language must be one of "python", "bash", "sh", "node", "javascript"'],
    ['timeout too long', { code: 'x', timeoutSeconds: 3601 }, 'spec.timeoutSeconds must be at most 3600'],
    ['timeout zero', { code: 'x', timeoutSeconds: 0 }, 'spec.timeoutSeconds must be at least 1'],
    ['fractional timeout', { code: 'x', timeoutSeconds: 1.5 }, 'spec.timeoutSeconds must be an integer'],
    ['bad cpu', { code: 'x', resources: { cpu: '1 core' } }, 'spec.resources.cpu must be a Kubernetes quantity'],
    ['bad memory', { code: 'x', resources: { memory: '-1Gi' } }, 'spec.resources.memory must be a Kubernetes quantity'],
    ['negative ttl', { code: 'x', ttlSecondsAfterFinished: -1 }, 'spec.ttlSecondsAfterFinished must be at least 0'],
    ['huge stdin', { code: 'x', stdin: 'a'.repeat(262145) }, 'spec.stdin must be at most 262144'],
  ])('rejects %s', (_name, spec, expected) => {
    const result = parseSandboxRun(run(spec));
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.message).toMatch(/^Invalid SandboxRun: /);
      expect(result.message).toContain(expected);
    }
  });

  it.each<[string, unknown, string]>([
    ['not an object', 'nope', '(object) must be an object'],
    ['wrong kind', { ...run({ code: 'x' }), kind: 'Pod' }, 'kind must be "SandboxRun"'],
    ['no name', { ...run({ code: 'x' }), metadata: {} }, 'metadata.name is required'],
    [
      'bad condition',
      run({ code: 'x' }, { status: { conditions: [{ type: 'Ready', status: 'Maybe' }] } }),
      'status.conditions[0].status must be one of "True", "False", "Unknown"',
    ],
    ['bad time', run({ code: 'x' }, { status: { startTime: 'yesterday' } }), 'status.startTime must be an RFC 3339 date-time'],
  ])('rejects %s', (_name, obj, expected) => {
    const result = parseSandboxRun(obj);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.message).toContain(expected);
  });

  // The kubelet reads a limit of 0 as none (no memory limit, no CPU quota): "at most the maximum"
  // alone would let a run ask for 0 and get an unbounded sandbox.
  const runResources = (buildSandboxRunCrd().spec.versions[0]!.schema.openAPIV3Schema.properties as Record<string, JsonSchema>).spec!;
  const crdPattern = (field: 'cpu' | 'memory'): RegExp =>
    new RegExp(String(((runResources.properties as Record<string, JsonSchema>).resources!.properties as Record<string, JsonSchema>)[field]!.pattern));
  it.each<[string, 'cpu' | 'memory']>([
    ['0', 'memory'],
    ['0', 'cpu'],
    ['0Mi', 'memory'],
    ['0m', 'cpu'],
    ['0.0', 'memory'],
    ['.0', 'cpu'],
    ['000Gi', 'memory'],
    ['0.000k', 'cpu'],
  ])('rejects a zero quantity %s for %s, in zod and in the CRD', (q, field) => {
    const result = parseSandboxRun(run({ code: 'x', resources: { [field]: q } }));
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.message).toContain(`spec.resources.${field} must be a Kubernetes quantity above zero`);
    expect(crdPattern(field).test(q)).toBe(false);
  });

  it.each(['1', '500m', '0.5', '.5', '0.001', '1.0', '10', '256Mi', '0.5Gi', '100k', '01'])('accepts the positive quantity %s', (q) => {
    expect(parseSandboxRun(run({ code: 'x', resources: { cpu: q, memory: q } })).ok).toBe(true);
    expect(crdPattern('cpu').test(q) && crdPattern('memory').test(q)).toBe(true);
  });

  it('lists every bad field in one message', () => {
    const result = parseSandboxRun(run({ code: '', language: 'ruby' }));
    if (result.ok) throw new Error('expected failure');
    expect(result.message).toContain('spec.code');
    expect(result.message).toContain('spec.language');
  });
});

describe('toolCallsStatus', () => {
  const many = Object.fromEntries(Array.from({ length: MAX_TOOL_CALL_SERVERS + 5 }, (_, i) => [`s${String(i).padStart(2, '0')}`, { calls: i, errors: 0 }]));
  it.each<[string, Parameters<typeof toolCallsStatus>[0], ReturnType<typeof toolCallsStatus>]>([
    ['no servers named', { calls: 0, errors: 0, upstreamWaitMs: 0, servers: {} }, { calls: 0, errors: 0, upstreamWaitMs: 0 }],
    [
      'servers busiest first, ties by name; the wait rounded',
      { calls: 4, errors: 1, upstreamWaitMs: 12.6, servers: { b: { calls: 1, errors: 0 }, a: { calls: 1, errors: 1 }, c: { calls: 2, errors: 0 } } },
      {
        calls: 4,
        errors: 1,
        upstreamWaitMs: 13,
        servers: [
          { name: 'c', calls: 2, errors: 0 },
          { name: 'a', calls: 1, errors: 1 },
          { name: 'b', calls: 1, errors: 0 },
        ],
      },
    ],
    [
      'a negative wait (clock skew) as 0',
      { calls: 1, errors: 0, upstreamWaitMs: -3, servers: { a: { calls: 1, errors: 0 } } },
      { calls: 1, errors: 0, upstreamWaitMs: 0, servers: [{ name: 'a', calls: 1, errors: 0 }] },
    ],
  ])('%s', (_name, counts, expected) => {
    expect(toolCallsStatus(counts)).toEqual(expected);
    expect(SandboxRunStatusSchema.safeParse({ toolCalls: expected }).success).toBe(true);
  });

  it(`keeps the ${MAX_TOOL_CALL_SERVERS} busiest servers, and the status validates`, () => {
    const s = toolCallsStatus({ calls: 2000, errors: 0, upstreamWaitMs: 1, servers: many });
    expect(s.servers).toHaveLength(MAX_TOOL_CALL_SERVERS);
    expect(s.servers?.[0]?.name).toBe(`s${MAX_TOOL_CALL_SERVERS + 4}`);
    expect(s.servers?.some((x) => x.name === 's00')).toBe(false);
    expect(SandboxRunStatusSchema.safeParse({ toolCalls: s }).success).toBe(true);
  });
});
