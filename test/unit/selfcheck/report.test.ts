import { describe, expect, it } from 'vitest';
import { MAX_REPORT_BYTES, cgroupNumber, parseCanaryReport } from '../../../src/selfcheck/report.js';
import { goodReport } from './fixtures.js';

const good = JSON.stringify(goodReport());

describe('parseCanaryReport', () => {
  it.each<[string, string, string | undefined]>([
    ['one JSON line', `${good}\n`, undefined],
    ['the last line after a warning', `DeprecationWarning: something\n${good}\n`, undefined],
    ['nothing', '', 'the canary printed no report'],
    ['not JSON', 'Traceback (most recent call last):\n', 'the report is not valid JSON'],
    ['a different shape', '{"v":1}', 'the report does not match its schema (at uid)'],
    ['an unknown version', good.replace('"v":1', '"v":2'), 'the report does not match its schema (at v)'],
    ['an unknown network target', good.replace('"name":"dns"', '"name":"elsewhere"'), 'the report does not match its schema (at network.3.name)'],
    ['an overlong field', good.replace('"detail":"timeout"', `"detail":"${'x'.repeat(201)}"`), 'the report does not match its schema (at network.0.detail)'],
    ['too much output', 'x'.repeat(MAX_REPORT_BYTES + 1), `the report is larger than ${MAX_REPORT_BYTES} bytes`],
  ])('%s', (_name, stdout, problem) => {
    const parsed = parseCanaryReport(stdout);
    if (problem === undefined) expect(parsed).toEqual({ ok: true, report: goodReport() });
    else expect(parsed).toEqual({ ok: false, problem });
  });

  it('never quotes what the pod printed', () => {
    const parsed = parseCanaryReport('SECRET-do-not-echo');
    expect(JSON.stringify(parsed)).not.toContain('SECRET');
  });
});

describe('cgroupNumber', () => {
  it.each<[{ path: string; value: string } | null, number | undefined]>([
    [{ path: 'p', value: '128' }, 128],
    [{ path: 'p', value: '0' }, 0],
    [{ path: 'p', value: 'max' }, undefined],
    // cgroup v1 writes "unlimited" as the largest page-aligned int64: not a safe integer.
    [{ path: 'p', value: '9223372036854771712' }, undefined],
    [{ path: 'p', value: '-1' }, undefined],
    [{ path: 'p', value: '12 34' }, undefined],
    [null, undefined],
  ])('%j → %s', (v, n) => {
    expect(cgroupNumber(v)).toBe(n);
  });
});
