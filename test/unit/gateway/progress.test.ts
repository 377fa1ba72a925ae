// Progress notifications: coalescing output per stream and tick, the budget, the heartbeat between
// them, stopping on failure.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ProgressReporter } from '../../../src/gateway/tools/progress.js';
import type { OutputChunk } from '../../../src/runs/types.js';

// The reporter's tick and budget (src/gateway/tools/progress.ts), restated: a test of the numbers.
const TICK_MS = 50;
const TOTAL_CHARS = 1024 * 1024;
const COST_PER_NOTIFICATION = 64;

describe('ProgressReporter', () => {
  it('coalesces within the window, one notification per stream, and caps each message', async () => {
    vi.useFakeTimers();
    try {
      const sent: Array<[number, string]> = [];
      const reporter = new ProgressReporter(
        async (p, m) => void sent.push([p, m ?? '']),
        () => undefined,
      );
      reporter.push({ stream: 'stdout', text: 'a' });
      reporter.push({ stream: 'stdout', text: 'b' });
      reporter.push({ stream: 'stderr', text: 'oops' }); // same tick: sent after the stdout text
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

describe('ProgressReporter per tick', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  function recorder(heartbeatMs = 0): { sent: Array<string | undefined>; reporter: ProgressReporter } {
    const sent: Array<string | undefined> = [];
    return {
      sent,
      reporter: new ProgressReporter(
        async (_p, m) => void sent.push(m),
        () => undefined,
        heartbeatMs,
      ),
    };
  }

  const out = (text: string): OutputChunk => ({ stream: 'stdout', text });
  const err = (text: string): OutputChunk => ({ stream: 'stderr', text });

  it.each([
    // [what happens, steps (ms to advance, or a chunk to push), expected messages before close, after close]
    ['nothing before the first tick, all at close', [out('a'), TICK_MS - 1], [], ['a']],
    ['first output after one tick', [out('a'), TICK_MS, out('b')], ['a'], ['a', 'b']],
    [
      'alternating streams in one tick: one message each, first writer first',
      [out('a'), err('1'), out('b'), err('2'), TICK_MS],
      ['ab', 'stderr: 12'],
      ['ab', 'stderr: 12'],
    ],
    ['stderr wrote first', [err('1'), out('a'), err('2')], [], ['stderr: 12', 'a']],
    [
      'each tick on its own',
      [out('a'), err('1'), TICK_MS, err('2'), out('b'), TICK_MS, out('c')],
      ['a', 'stderr: 1', 'stderr: 2', 'b'],
      ['a', 'stderr: 1', 'stderr: 2', 'b', 'c'],
    ],
    ['empty chunks send nothing', [out(''), err(''), TICK_MS], [], []],
  ] as const)('%s', async (_what, steps, beforeClose, afterClose) => {
    const { sent, reporter } = recorder();
    for (const step of steps) {
      if (typeof step === 'number') await vi.advanceTimersByTimeAsync(step);
      else reporter.push(step);
    }
    expect(sent).toEqual(beforeClose);
    await reporter.close();
    expect(sent).toEqual(afterClose);
  });

  it.each([
    // [chunks written, chunks per ms]: 1-byte writes alternating stdout and stderr
    [20_000, 10],
    [20_000, 1],
    [5_000, 100],
  ])('%i alternating 1-byte chunks, %i a ms: at most one notification per stream per tick', async (chunks, perMs) => {
    const { sent, reporter } = recorder();
    for (let i = 0; i < chunks; i++) {
      reporter.push(i % 2 === 0 ? out('a') : err('b'));
      if (i % perMs === perMs - 1) await vi.advanceTimersByTimeAsync(1);
    }
    await reporter.close();
    const ticks = Math.ceil(chunks / perMs / TICK_MS) + 1; // + the flush at close
    expect(sent.length).toBeLessThanOrEqual(2 * ticks);
    // Nothing lost, each stream's text in order.
    const stdout = sent.filter((m) => !m?.startsWith('stderr: ')).join('');
    const stderr = sent
      .filter((m) => m?.startsWith('stderr: '))
      .map((m) => m?.slice('stderr: '.length))
      .join('');
    expect([stdout, stderr]).toEqual(['a'.repeat(chunks / 2), 'b'.repeat(chunks / 2)]);
  });

  it('charges every notification a fixed cost against the budget, and keeps beating after it', async () => {
    const { sent, reporter } = recorder(60_000);
    // One character a tick: without the fixed cost the budget would last a million ticks.
    for (let i = 0; i < 20_000; i++) {
      reporter.push(out('x'));
      await vi.advanceTimersByTimeAsync(TICK_MS);
    }
    expect(sent.filter((m) => m !== undefined)).toHaveLength(Math.ceil(TOTAL_CHARS / (COST_PER_NOTIFICATION + 1)));
    // Progress output stopped, but the heartbeat still keeps the call alive.
    const before = sent.length;
    await vi.advanceTimersByTimeAsync(60_000);
    expect(sent.slice(before)).toEqual([undefined]);
    await reporter.close();
  });

  it('charges the progress token each notification repeats, so a long one cannot multiply what the budget allows', async () => {
    const token = 256;
    const sent: Array<string | undefined> = [];
    const reporter = new ProgressReporter(
      async (_p, m) => void sent.push(m),
      () => undefined,
      0,
      COST_PER_NOTIFICATION + token,
    );
    for (let i = 0; i < 20_000; i++) {
      reporter.push(out('x'));
      await vi.advanceTimersByTimeAsync(TICK_MS);
    }
    await reporter.close();
    expect(sent).toHaveLength(Math.ceil(TOTAL_CHARS / (COST_PER_NOTIFICATION + token + 1)));
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
