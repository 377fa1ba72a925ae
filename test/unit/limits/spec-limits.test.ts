import { describe, expect, it } from 'vitest';
import { invalidSpecMessage, limitProblems, type LimitRequest } from '../../../src/limits/spec-limits.js';
import { MIN_MEMORY, MIN_MEMORY_BYTES } from '../../../src/api/v1alpha1/index.js';
import { parseQuantity } from '../../../src/config/quantity.js';

const LIMITS = { maxTimeoutSeconds: 60, maxCodeBytes: 100, maxCpu: '1', maxMemory: '1Gi' };

describe('limitProblems', () => {
  it.each<[string, LimitRequest, string[]]>([
    ['within every limit', { timeoutSeconds: 60, code: 'x'.repeat(100), resources: { cpu: '1', memory: '1Gi' } }, []],
    ['a timeout above the maximum', { timeoutSeconds: 61, code: 'x' }, ['spec.timeoutSeconds']],
    ['code over the byte limit (counted in UTF-8, not characters)', { timeoutSeconds: 1, code: 'é'.repeat(51) }, ['spec.code']],
    ['cpu above the maximum', { timeoutSeconds: 1, code: 'x', resources: { cpu: '1500m' } }, ['spec.resources.cpu']],
    ['memory above the maximum', { timeoutSeconds: 1, code: 'x', resources: { memory: '1025Mi' } }, ['spec.resources.memory']],
    // A slip of the suffix: 512m is half a byte, 512 bytes, 512k half a megabyte.
    ['memory in thousandths of a byte', { timeoutSeconds: 1, code: 'x', resources: { memory: '512m' } }, ['spec.resources.memory']],
    ['memory in bytes', { timeoutSeconds: 1, code: 'x', resources: { memory: '512' } }, ['spec.resources.memory']],
    ['memory at the minimum', { timeoutSeconds: 1, code: 'x', resources: { memory: '16Mi' } }, []],
    [
      'everything at once, in field order',
      { timeoutSeconds: 99, code: 'x'.repeat(101), resources: { cpu: '2', memory: '2Gi' } },
      ['spec.timeoutSeconds', 'spec.code', 'spec.resources.cpu', 'spec.resources.memory'],
    ],
  ])('%s', (_name, req, fields) => {
    expect(limitProblems(req, LIMITS).map((p) => p.field)).toEqual(fields);
  });

  it('says what is wrong and what to do, as one sentence for a SandboxRun', () => {
    const message = invalidSpecMessage(limitProblems({ timeoutSeconds: 120, code: 'x' }, LIMITS));
    expect(message).toBe(
      'Invalid SandboxRun: spec.timeoutSeconds: timeout 120s is above the maximum of 60s; use a timeout of at most 60 seconds, or split the work into shorter runs.',
    );
    expect(invalidSpecMessage([])).toBeUndefined();
    // A SandboxRun's spec: the CRD fills a timeout left out with 30, which the user never wrote.
    const small = { ...LIMITS, maxTimeoutSeconds: 10 };
    expect(limitProblems({ timeoutSeconds: 30, code: 'x' }, small, true)[0]?.problem).toBe(
      'timeout 30s (30 is its default when left out) is above the maximum of 10s',
    );
    expect(limitProblems({ timeoutSeconds: 30, code: 'x' }, small)[0]?.problem).toBe('timeout 30s is above the maximum of 10s');
    expect(limitProblems({ timeoutSeconds: 31, code: 'x' }, small, true)[0]?.problem).toBe('timeout 31s is above the maximum of 10s');
    expect(parseQuantity(MIN_MEMORY)).toBe(MIN_MEMORY_BYTES);
    expect(invalidSpecMessage(limitProblems({ timeoutSeconds: 1, code: 'x', resources: { memory: '512m' } }, LIMITS))).toBe(
      'Invalid SandboxRun: spec.resources.memory: memory 512m is below the minimum of 16Mi; ask for at least 16Mi, e.g. 512Mi (a lowercase m means thousandths: 512m is half a byte).',
    );
  });
});
