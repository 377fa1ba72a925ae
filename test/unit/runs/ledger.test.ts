import { describe, expect, it, vi } from 'vitest';
import { RunLedger } from '../../../src/runs/ledger.js';
import type { RunOutcome } from '../../../src/runs/types.js';

/** A promise settled by hand. */
function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (e: unknown) => void } {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

const outcome = { phase: 'Succeeded' } as RunOutcome;
const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('RunLedger', () => {
  it.each([
    ['nothing known', () => undefined, false],
    ['executing', (l: RunLedger) => void l.start('u', 'ns/r', () => new Promise<RunOutcome>(() => undefined)), true],
    ['settling', (l: RunLedger) => l.settle('u', new Promise<void>(() => undefined)), true],
    ['started and ended', (l: RunLedger) => void l.start('u', 'ns/r', () => Promise.resolve(outcome)), false],
    ['another run executing', (l: RunLedger) => void l.start('other', 'ns/o', () => new Promise<RunOutcome>(() => undefined)), false],
  ])('isBusy: %s → %s', async (_, given, busy) => {
    const l = new RunLedger();
    given(l);
    await tick();
    expect(l.isBusy('u')).toBe(busy);
  });

  it('records a start before its body runs, and remembers it after the execution ended', async () => {
    const l = new RunLedger();
    let seen: boolean | undefined;
    const e = l.start('u', 'ns/r', () => {
      seen = l.startedAlready('u');
      return Promise.resolve(outcome);
    });
    expect(seen).toBe(true);
    expect(l.execution('u')).toBe(e);
    await e.promise;
    expect(l.execution('u')).toBeUndefined();
    expect(l.startedAlready('u')).toBe(true);
  });

  it('ends the output subscriptions with the execution, failed or not', async () => {
    const l = new RunLedger();
    const d = deferred<RunOutcome>();
    const e = l.start('u', 'ns/r', () => d.promise);
    e.output.on('chunk', () => undefined);
    d.reject(new Error('boom'));
    await expect(e.promise).rejects.toThrow('boom');
    expect(e.output.listenerCount('chunk')).toBe(0);
    expect(l.isBusy('u')).toBe(false);
  });

  it.each([
    ['its uid', { uid: 'u1' }, ['u2', 'u3']],
    ['its namespace/name', { key: 'ns/a' }, ['u3']],
    ['another uid', { uid: 'nope' }, ['u1', 'u2', 'u3']],
    ['another name', { key: 'ns/zzz' }, ['u1', 'u2', 'u3']],
  ])('forget by %s', async (_, what, left) => {
    const l = new RunLedger();
    // Two runs of one name (deleted and created again) and one other.
    for (const [uid, key] of [
      ['u1', 'ns/a'],
      ['u2', 'ns/a'],
      ['u3', 'ns/b'],
    ] as const)
      await l.start(uid, key, () => Promise.resolve(outcome)).promise;
    l.forget(what);
    expect(['u1', 'u2', 'u3'].filter((u) => l.startedAlready(u))).toEqual(left);
  });

  it('remembers a finished run until what is left of its budget is over, asked however often', async () => {
    vi.useFakeTimers();
    try {
      const l = new RunLedger();
      await l.start('u', 'ns/a', () => Promise.resolve(outcome)).promise;
      await l.start('v', 'ns/b', () => Promise.resolve(outcome)).promise;
      l.forgetAfter('u', 60_000);
      vi.advanceTimersByTime(30_000);
      l.forgetAfter('u', 60_000); // seen again: the first deadline stands
      l.forgetAfter('v', 0); // its budget already over: at once
      expect([l.startedAlready('u'), l.startedAlready('v')]).toEqual([true, false]);
      vi.advanceTimersByTime(30_000);
      expect(l.startedAlready('u')).toBe(false);
    } finally {
      vi.useRealTimers();
    }
  });

  it('keeps a creating mark until its end is called', () => {
    const l = new RunLedger();
    const end = l.creating('ns/r');
    expect(l.isCreating('ns/r')).toBe(true);
    expect(l.isCreating('ns/other')).toBe(false);
    end();
    expect(l.isCreating('ns/r')).toBe(false);
  });

  it('drains executions, their writes and runs being created, including ones that start while it waits', async () => {
    const l = new RunLedger();
    const run = deferred<RunOutcome>();
    const writes = deferred<void>();
    const creating = deferred<RunOutcome>();
    const late = deferred<RunOutcome>();
    l.start('u1', 'ns/a', () => run.promise);
    l.settle('u0', writes.promise);
    void l.whileCreating(creating.promise).catch(() => undefined);
    let drained = false;
    const draining = l.drain().then(() => (drained = true));
    creating.reject(new Error('create refused'));
    run.resolve(outcome);
    await tick();
    // Only the writes are left when a request that reached the stopping replica late starts a run.
    l.start('u2', 'ns/b', () => late.promise);
    writes.resolve();
    await tick();
    expect(drained).toBe(false);
    late.resolve(outcome);
    await draining;
    expect(drained).toBe(true);
    expect(l.isBusy('u1') || l.isBusy('u2') || l.isBusy('u0')).toBe(false);
  });

  it('a later settle of the same run is not cut short by the end of an earlier one', async () => {
    const l = new RunLedger();
    const first = deferred<void>();
    const second = deferred<void>();
    l.settle('u', first.promise);
    l.settle('u', second.promise);
    first.resolve();
    await tick();
    expect(l.isBusy('u')).toBe(true);
    second.resolve();
    await tick();
    expect(l.isBusy('u')).toBe(false);
  });
});
