// Progress notifications: coalescing output, the heartbeat between them, stopping on failure.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ProgressReporter } from '../../../src/gateway/tools/progress.js';

describe('ProgressReporter', () => {
  it('coalesces within the window, flushes on stream change and caps each message', async () => {
    vi.useFakeTimers();
    try {
      const sent: Array<[number, string]> = [];
      const reporter = new ProgressReporter(
        async (p, m) => void sent.push([p, m ?? '']),
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

describe('ProgressReporter heartbeat', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  function recorder(heartbeatMs: number): { sent: Array<[number, string | undefined]>; reporter: ProgressReporter } {
    const sent: Array<[number, string | undefined]> = [];
    return {
      sent,
      reporter: new ProgressReporter(
        async (p, m) => void sent.push([p, m]),
        () => undefined,
        heartbeatMs,
      ),
    };
  }

  it.each([
    // [what happens, heartbeat ms, steps (ms to advance, or a chunk to push), expected notifications]
    ['a silent call beats once per interval', 1000, [3500], [[1], [2], [3]]],
    ['output resets the interval', 1000, [900, 'a', 100, 900, 1000], [[1, 'a'], [2]]],
    ['no heartbeat when the interval is 0', 0, [60_000], []],
    ['output then silence', 1000, ['a', 2100], [[1, 'a'], [2], [3]]],
  ] as const)('%s', async (_what, heartbeatMs, steps, expected) => {
    const { sent, reporter } = recorder(heartbeatMs);
    for (const step of steps) {
      if (typeof step === 'number') await vi.advanceTimersByTimeAsync(step);
      else reporter.push({ stream: 'stdout', text: step });
    }
    await reporter.close();
    expect(sent).toEqual(expected.map(([p, m]) => [p, m]));
  });

  it('stops beating at close and after a failed send', async () => {
    const closed = recorder(1000);
    await vi.advanceTimersByTimeAsync(1000);
    await closed.reporter.close();
    await vi.advanceTimersByTimeAsync(10_000);
    expect(closed.sent).toEqual([[1, undefined]]);

    const onError = vi.fn();
    const send = vi.fn(async () => {
      throw new Error('client gone');
    });
    const failing = new ProgressReporter(send, onError, 1000);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(send).toHaveBeenCalledTimes(1);
    expect(onError).toHaveBeenCalledTimes(1);
    await failing.close();
  });
});
