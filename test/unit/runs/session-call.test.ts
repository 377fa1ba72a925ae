import { describe, expect, it } from 'vitest';
import { asReason, type Language, type SessionLanguage } from '../../../src/api/v1alpha1/index.js';
import { codeTimes, languageProblem, problemOf, problemReason, sessionCallRequest } from '../../../src/runs/session-call.js';
import { SessionBusyError, SessionError, SessionNotReadyError } from '../../../src/sessions/errors.js';

describe('languageProblem (one rule for execute_code and SandboxRun.spec.session)', () => {
  it.each<[SessionLanguage, Language | undefined, boolean]>([
    ['python', undefined, true],
    ['bash', undefined, true],
    ['python', 'python', true],
    ['bash', 'bash', true],
    ['bash', 'sh', true],
    ['node', 'javascript', true],
    ['javascript', 'node', true],
    ['bash', 'python', false],
    ['python', 'bash', false],
    ['python', 'sh', false],
    ['node', 'python', false],
  ])('a %s session, code in %s: fits=%s', (session, requested, fits) => {
    const problem = languageProblem('s1', session, requested);
    expect(problem === undefined).toBe(fits);
    if (problem) {
      expect(problem.stage).toBe('refused');
      expect(problem.message).toBe(`Session s1 runs ${session}, not ${requested}.`);
    }
  });

  // A SandboxRun cannot leave its language out: the CRD fills in python.
  it.each<[string | undefined, string]>([
    [undefined, 'Send bash code to this session (or leave the language out), or create a python session.'],
    ['spec.language', 'Set spec.language: bash for this session (left out, it is python), or use a python session.'],
  ])('the hint where the language was written in %s', (field, hint) => {
    expect(languageProblem('s1', 'bash', 'python', field)?.hint).toBe(hint);
  });
});

describe('codeTimes (a call in a session that may have waited for its turn)', () => {
  const waitStart = new Date('2026-11-28T10:00:00.000Z');
  const end = new Date('2026-11-28T10:00:10.000Z');
  it.each([
    ['no wait: the kernel ran it the whole time', 10_000, '2026-11-28T10:00:00.000Z'],
    ['waited 8 s, ran 2 s', 2_000, '2026-11-28T10:00:08.000Z'],
    ['a kernel claiming longer than the call: the wait start', 60_000, '2026-11-28T10:00:00.000Z'],
    ['no duration from the kernel: the wait start', undefined, '2026-11-28T10:00:00.000Z'],
    ['a zero duration: the end', 0, '2026-11-28T10:00:10.000Z'],
  ])('%s', (_name, durationMs, start) => {
    expect(codeTimes(waitStart, durationMs, end)).toEqual({ start: new Date(start), end });
  });
});

describe('problemOf (what a session error means for the call and its SandboxRun)', () => {
  it.each([
    ['busy for the whole wait', new SessionBusyError('m', 'h'), 'busy', false, 'SessionBusy'],
    ['still starting for the whole wait', new SessionNotReadyError('m', 'h'), 'starting', false, 'SessionNotReady'],
    ['unreachable: the code did not run', new SessionError('m', 'h'), 'failed', false, 'KernelLost'],
    ['the stream broke during the call', new SessionError('m', 'h', { mayHaveRun: true }), 'failed', true, 'KernelLost'],
    ['a session that failed to start: its own reason', new SessionError('m', 'h', { reason: 'Unschedulable' }), 'failed', false, 'Unschedulable'],
  ] as const)('%s', (_name, err, stage, mayHaveRun, reason) => {
    const problem = problemOf(err);
    expect(problem).toStrictEqual({
      stage,
      message: 'm',
      hint: 'h',
      ...(mayHaveRun && { mayHaveRun: true }),
      ...(err.reason && { reason: err.reason }),
    });
    // What a SandboxRun in the session records (executor.ts).
    expect(problem.reason ?? problemReason[problem.stage]).toBe(reason);
  });
});

describe('asReason (a session reason a run can record too)', () => {
  it.each([
    ['Unschedulable', 'Unschedulable'],
    ['ImageNotFound', 'ImageNotFound'],
    ['PackagesFailed', undefined],
    ['KernelReady', undefined],
    [undefined, undefined],
  ] as const)('%s → %s', (value, expected) => {
    expect(asReason(value)).toBe(expected);
  });
});

describe('sessionCallRequest (one shape from an execute_code request and from a SandboxRun spec)', () => {
  const owner = { user: 'alice', groups: [] };
  it.each([
    ['the least', { code: 'x', timeoutSeconds: 5 }, {}, { session: 's', code: 'x', timeoutSeconds: 5 }],
    [
      'a SandboxRun spec: its other fields stay out',
      { code: 'x', timeoutSeconds: 5, language: 'python', stdin: 'in', owner, ttlSecondsAfterFinished: 60, session: 'ignored' },
      { waitUntil: 1000 },
      { session: 's', code: 'x', timeoutSeconds: 5, language: 'python', stdin: 'in', owner, waitUntil: 1000 },
    ],
    [
      'undefined fields are left out',
      { code: 'x', timeoutSeconds: 5, language: undefined, stdin: undefined, owner: undefined },
      {},
      { session: 's', code: 'x', timeoutSeconds: 5 },
    ],
  ] as const)('%s', (_name, src, extra, expected) => {
    expect(sessionCallRequest('s', src as Parameters<typeof sessionCallRequest>[1], extra)).toStrictEqual(expected);
  });
});
