// Pure parts of execute_code: result text, error classification.
import { describe, expect, it } from 'vitest';
import { formatRunText, isRunError } from '../../../src/gateway/tools/execute-code.js';
import { outcome } from './harness.js';

describe('formatRunText', () => {
  it.each([
    ['stdout only', outcome({ stdout: 'hi\n' }), undefined, 'stdout:\nhi\n\nexit code: 0'],
    ['nothing printed', outcome(), undefined, 'exit code: 0'],
    ['no exit code, no output', outcome({ exitCode: undefined }), undefined, '(no output)'],
    ['both streams, non-zero exit', outcome({ stdout: 'a', stderr: 'b\n', exitCode: 2 }), undefined, 'stdout:\na\n\nstderr:\nb\n\nexit code: 2'],
    [
      'failure with partial output, truncated',
      outcome({ stdout: 'x', exitCode: undefined, truncated: true }),
      'It failed.',
      'It failed.\n\nstdout:\nx\n\n(output truncated at the output cap; print less or write a summary)',
    ],
  ])('%s', (_name, run, failure, expected) => {
    expect(formatRunText(run, failure)).toBe(expected);
  });
});

describe('isRunError', () => {
  it.each([
    ['Succeeded', undefined, false],
    ['Failed', 'NonZeroExit', false],
    ['Failed', 'OOMKilled', true],
    ['Failed', 'PodDeleted', true],
    ['Failed', undefined, true],
    ['TimedOut', 'DeadlineExceeded', true],
  ] as const)('%s/%s → %s', (phase, reason, expected) => {
    expect(isRunError(outcome({ phase, reason }))).toBe(expected);
  });
});
