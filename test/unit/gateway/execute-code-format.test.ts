// Pure parts of execute_code: result text, error classification, progress coalescing.
import { describe, expect, it, vi } from 'vitest';
import { ProgressReporter, formatRunText, isRunError } from '../../../src/gateway/tools/execute-code.js';
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

describe('ProgressReporter', () => {
  it('coalesces within the window, flushes on stream change and caps each message', async () => {
    vi.useFakeTimers();
    try {
      const sent: Array<[number, string]> = [];
      const reporter = new ProgressReporter(
        async (p, m) => void sent.push([p, m]),
        () => undefined,
      );
      reporter.push({ stream: 'stdout', text: 'a' });
      reporter.push({ stream: 'stdout', text: 'b' });
      reporter.push({ stream: 'stderr', text: 'oops' }); // stream change: flushes "ab" now
      await vi.advanceTimersByTimeAsync(60);
      reporter.push({ stream: 'stdout', text: 'x'.repeat(10_000) });
      await reporter.close();
      reporter.push({ stream: 'stdout', text: 'late' }); // after close: ignored
      await vi.advanceTimersByTimeAsync(60);
      expect(sent.map(([p]) => p)).toEqual([1, 2, 3]);
      expect(sent[0]?.[1]).toBe('ab');
      expect(sent[1]?.[1]).toBe('stderr: oops');
      expect(sent[2]?.[1]).toBe(`${'x'.repeat(4096)}… (more output in the result)`);
    } finally {
      vi.useRealTimers();
    }
  });

  it('stops after the first failed send (the client went away)', async () => {
    const onError = vi.fn();
    const send = vi.fn(async () => {
      throw new Error('closed');
    });
    const reporter = new ProgressReporter(send, onError);
    reporter.push({ stream: 'stdout', text: 'a' });
    reporter.push({ stream: 'stderr', text: 'b' });
    await reporter.close();
    expect(send).toHaveBeenCalledTimes(1);
    expect(onError).toHaveBeenCalledTimes(1);
  });
});
