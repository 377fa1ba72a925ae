// A session call's result as a RunOutcome: texts stay within the cap after stderr and the
// traceback are joined, and an exception's summary stays short.
import { describe, expect, it } from 'vitest';
import { sessionOutcome } from '../../../src/runs/session-outcome.js';
import type { SessionCallResult } from '../../../src/sessions/service.js';

const base: SessionCallResult = {
  session: 's',
  capChars: 10,
  status: 'ok',
  stdout: '',
  stderr: '',
  stdoutBytes: 0,
  stderrBytes: 0,
  truncated: false,
  durationMs: 1,
};

describe('sessionOutcome', () => {
  it.each([
    ['an ok call', base, { phase: 'Succeeded', stderr: '', truncated: false }],
    [
      'a command that failed and wrote to stderr',
      { ...base, exitCode: 2, stderr: 'no such file', stderrBytes: 12 },
      { phase: 'Failed', reason: 'NonZeroExit', message: 'The command exited with code 2; see stderr.' },
    ],
    [
      'a command that failed silently',
      { ...base, exitCode: 1 },
      { phase: 'Failed', reason: 'NonZeroExit', message: 'The command exited with code 1 and wrote nothing to stderr.' },
    ],
    [
      'an exception: traceback joins stderr',
      { ...base, status: 'error', stderr: 'ab', stderrBytes: 2, error: { ename: 'E', evalue: 'v', traceback: 'tb' } },
      { phase: 'Failed', reason: 'Exception', stderr: 'abtb', stderrBytes: 4, message: 'E: v', truncated: false },
    ],
    [
      'stderr and traceback cut to the cap together',
      { ...base, status: 'error', stderr: 'x'.repeat(8), error: { ename: 'E', evalue: 'v', traceback: 'y'.repeat(8) } },
      { stderr: `${'x'.repeat(8)}yy`, truncated: true },
    ],
    [
      'a traceback already in stderr is not repeated',
      { ...base, status: 'error', stderr: 'tb', stderrBytes: 2, error: { ename: 'E', evalue: 'v', traceback: 'tb' } },
      { stderr: 'tb', stderrBytes: 2 },
    ],
    [
      'a traceback that ends stderr, before a newline, is not repeated',
      { ...base, status: 'error', stderr: 'out\ntb\n', stderrBytes: 7, error: { ename: 'E', evalue: 'v', traceback: 'tb' } },
      { stderr: 'out\ntb\n', stderrBytes: 7 },
    ],
    [
      // Looked for at the end only: a search anywhere costs stderr × traceback for a forged one.
      'a traceback inside stderr, not at its end, is joined again',
      { ...base, status: 'error', stderr: 'tb after', stderrBytes: 8, error: { ename: 'E', evalue: 'v', traceback: 'tb' } },
      { stderr: 'tb aftertb', stderrBytes: 10 },
    ],
    [
      // A kernel's forged result: stderr at the cap and a traceback whose long tail repeats in it
      // (a needle V8's search takes stderr × traceback steps over) is cut with it, as any text.
      'a forged traceback built to make a substring search slow',
      {
        ...base,
        capChars: 50_000,
        status: 'error',
        stderr: 'a'.repeat(50_000),
        stderrBytes: 50_000,
        error: { ename: 'E', evalue: 'v', traceback: `${'a'.repeat(10)}b${'a'.repeat(15_000)}` },
      },
      { stderr: 'a'.repeat(49_999) + 'a', truncated: true, stderrBytes: 65_011 },
    ],
    [
      'a long exception message is summarised',
      { ...base, status: 'error', error: { ename: 'E', evalue: 'v'.repeat(5000), traceback: '' } },
      { message: `E: ${'v'.repeat(997)}` },
    ],
    ['a lost kernel', { ...base, status: 'lost' }, { phase: 'Failed', reason: 'KernelLost' }],
    [
      "an eviction names the kubelet's reason, cut",
      { ...base, status: 'lost', error: { ename: 'Evicted', evalue: 'e'.repeat(5000), traceback: '' }, podFailure: 'Evicted' },
      { reason: 'Evicted', message: expect.stringMatching(/^The session's pod was evicted by the kubelet \(e{300}\)\. /) },
    ],
    // Code in the kernel's process writes frames: its words name no pod failure, and its text
    // (perhaps a secret it printed) is not quoted as the kubelet's.
    [
      'a kernel frame that says Evicted is a lost kernel, not an eviction',
      { ...base, status: 'lost', error: { ename: 'Evicted', evalue: 'AWS_SECRET_ACCESS_KEY=x', traceback: '' } },
      { reason: 'KernelLost', message: expect.not.stringContaining('AWS_SECRET_ACCESS_KEY') },
    ],
    [
      'a kernel frame that says OOMKilled is a lost kernel',
      { ...base, status: 'lost', error: { ename: 'OOMKilled', evalue: 'x', traceback: '' } },
      { reason: 'KernelLost' },
    ],
  ] as [string, SessionCallResult, Record<string, unknown>][])('%s', (_name, r, expected) => {
    expect(sessionOutcome(r, 'ns', 30)).toMatchObject(expected);
  });
});
