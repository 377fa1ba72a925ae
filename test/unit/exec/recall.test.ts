// What a kernel's answer to a recall means for a run whose executor is gone (RunExecutor.recover):
// an outcome to record, or nothing to record from (the run then ends Failed with a reason).
import { describe, expect, it } from 'vitest';
import { recalledNothing } from '../../../src/runs/in-pod.js';

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
