// Reading a call's result back from its kernel (src/exec/recall.ts): what an answer means, and
// when a recall after a broken stream tries again and when it gives up.
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { KernelConnection } from '../../../src/exec/kernel.js';
import { KernelConnectionError, KernelProtocolError, KernelUnreachableError } from '../../../src/exec/kernel.js';
import type { KernelResult } from '../../../src/exec/frames.js';
import { recallAfterBreak, recalledNothing } from '../../../src/exec/recall.js';

const error = (ename: string) => ({ ename, evalue: 'v', traceback: '' });

describe('recalledNothing', () => {
  it.each([
    ['a run that ended with exit code 0', { status: 'ok' as const }, false],
    ['a run that timed out', { status: 'timeout' as const }, false],
    ['a run whose program raised (its own error)', { status: 'error' as const, error: error('ValueError') }, false],
    ['a kernel error during the run', { status: 'error' as const, error: error('KernelError') }, false],
    ['a run the kernel never ran', { status: 'error' as const, notFound: true as const, error: error('NotFound') }, true],
    ['too many recalls waiting', { status: 'error' as const, busy: true as const, error: error('KernelBusy') }, true],
    ['a kernel before recall (unknown op)', { status: 'error' as const, error: error('ProtocolError') }, true],
  ])('%s → nothing to record: %s', (_name, answer, nothing) => {
    expect(recalledNothing(answer)).toBe(nothing);
  });
});

const RESULT: KernelResult = { status: 'ok', stdout: 'done\n', stderr: '', stdoutBytes: 5, stderrBytes: 0, truncated: false, durationMs: 3 };
const NOT_FOUND: KernelResult = { ...RESULT, status: 'error', stdout: '', stdoutBytes: 0, notFound: true, error: error('NotFound') };

/** What one attempt meets: a failure to reach the kernel, or the kernel's answer. */
type Attempt = Error | KernelResult;

/** A target whose attempts meet `attempts` in turn (the last one again after them). */
function target(attempts: Attempt[], stoppedAfter = Infinity) {
  let made = 0;
  return {
    get made() {
      return made;
    },
    key: 'call-1',
    capChars: 100,
    stopped: () => made >= stoppedAfter,
    connect: async (): Promise<KernelConnection> => {
      const a = attempts[Math.min(made++, attempts.length - 1)] as Attempt;
      if (a instanceof Error) throw a;
      return { recall: async (key: string) => (key === 'call-1' ? a : NOT_FOUND) } as unknown as KernelConnection;
    },
  };
}

const unreachable = () => new KernelUnreachableError('connect ECONNREFUSED');
const refused = () => new KernelConnectionError('container not found');

describe('recallAfterBreak', () => {
  it.each([
    ['the kernel answers at once', [RESULT], Infinity, RESULT, 1],
    ['the API server is back after two attempts', [unreachable(), refused(), RESULT], Infinity, RESULT, 3],
    ['the kernel keeps no result under the key', [NOT_FOUND], Infinity, undefined, 1],
    ['the pod broke the protocol', [new KernelProtocolError('garbage'), RESULT], Infinity, undefined, 1],
    ['the pod stopped while it could not be reached', [unreachable(), unreachable(), RESULT], 2, undefined, 2],
    ['a kernel that refuses the op (an older one)', [{ ...NOT_FOUND, notFound: undefined, error: error('ProtocolError') }], Infinity, undefined, 1],
  ] as const)('%s', async (_name, attempts, stoppedAfter, expected, made) => {
    const t = target([...attempts], stoppedAfter);
    expect(await recallAfterBreak(t, performance.now() + 5_000, 1)).toEqual(expected);
    expect(t.made).toBe(made);
  });

  it('gives up at its deadline while the kernel cannot be reached', async () => {
    const t = target([unreachable()]);
    expect(await recallAfterBreak(t, performance.now() + 50, 5)).toBeUndefined();
    expect(t.made).toBeGreaterThan(1);
  });

  describe('between attempts', () => {
    afterEach(() => vi.useRealTimers());

    it('waits 1, 2, then 4 s at most: a relay killed each time costs one exec per 4 s', async () => {
      vi.useFakeTimers({ toFake: ['setTimeout', 'performance'] });
      const t = target([unreachable()]);
      const done = recallAfterBreak(t, performance.now() + 20_000);
      const madeAfter: number[] = [];
      for (const step of [0, 999, 1, 1_999, 1, 3_999, 1, 3_999, 1]) {
        await vi.advanceTimersByTimeAsync(step);
        madeAfter.push(t.made);
      }
      expect(madeAfter).toEqual([1, 1, 2, 2, 3, 3, 4, 4, 5]);
      await vi.advanceTimersByTimeAsync(20_000);
      expect(await done).toBeUndefined();
    });
  });

  it('makes no attempt once the deadline has passed', async () => {
    const t = target([RESULT]);
    expect(await recallAfterBreak(t, performance.now() - 1, 1)).toBeUndefined();
    expect(t.made).toBe(0);
  });
});
