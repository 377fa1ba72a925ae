import { pino } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { CanaryRunResult } from '../../../src/selfcheck/canary-run.js';
import { SandboxChecker } from '../../../src/selfcheck/checker.js';
import { SANDBOX_CHECKS, type SandboxCheckName } from '../../../src/api/v1alpha1/index.js';
import type { CheckResult } from '../../../src/selfcheck/evaluate.js';

const log = pino({ level: 'silent' });
const results = (failing: SandboxCheckName[] = []): CheckResult[] =>
  SANDBOX_CHECKS.map((check) => ({ check, enforced: !failing.includes(check), detail: 'd' }));

function checker(outcomes: CanaryRunResult[], accept: SandboxCheckName[] = []): SandboxChecker {
  let i = 0;
  return new SandboxChecker({
    run: () => Promise.resolve(outcomes[Math.min(i++, outcomes.length - 1)] as CanaryRunResult),
    intervalSeconds: 3600,
    accept,
    log,
  });
}

describe('SandboxChecker as the gate', () => {
  it.each<[string, CanaryRunResult[], SandboxCheckName[], RegExp | undefined, RegExp | undefined]>([
    ['everything enforced', [{ ok: true, results: results() }], [], undefined, undefined],
    [
      'network not enforced',
      [{ ok: true, results: results(['network']) }],
      [],
      /does not enforce: network \(network isolation\)/,
      /not enforced by the cluster: network/,
    ],
    ['network not enforced, risk accepted', [{ ok: true, results: results(['network']) }], ['network'], undefined, undefined],
    ['process limit missing, network accepted', [{ ok: true, results: results(['process_limit']) }], ['network'], /process_limit/, /process_limit/],
    [
      'the first check could not run',
      [{ ok: false, problem: 'the canary pod did not start' }],
      [],
      /could not verify/,
      /could not run: the canary pod did not start/,
    ],
    ['it could not run, but every risk is accepted', [{ ok: false, problem: 'x' }], [...SANDBOX_CHECKS], undefined, undefined],
  ])('%s', async (_name, outcomes, accept, refusal, notReady) => {
    const c = checker(outcomes, accept);
    await c.checkNow();
    const text = await c.refusal();
    if (refusal === undefined) expect(text).toBeUndefined();
    else expect(text).toMatch(refusal);
    if (notReady === undefined) expect(c.notReady()).toBeUndefined();
    else expect(c.notReady()).toMatch(notReady);
  });

  it('keeps the last verdict when a later check cannot run', async () => {
    const c = checker([
      { ok: true, results: results(['network']) },
      { ok: false, problem: 'API hiccup' },
    ]);
    await c.checkNow();
    await c.checkNow();
    expect(c.status.kind).toBe('checked');
    expect(await c.refusal()).toMatch(/network/);
  });

  it('lets code run again once the cluster enforces the protection', async () => {
    const c = checker([
      { ok: true, results: results(['network']) },
      { ok: true, results: results() },
    ]);
    await c.checkNow();
    expect(await c.refusal()).toBeDefined();
    await c.checkNow();
    expect(await c.refusal()).toBeUndefined();
    expect(c.notReady()).toBeUndefined();
  });

  it('is not ready before the first check, and a call waits for its verdict', async () => {
    let release!: (r: CanaryRunResult) => void;
    const c = new SandboxChecker({ run: () => new Promise((r) => (release = r)), intervalSeconds: 3600, accept: [], log });
    expect(c.notReady()).toBe('the sandbox self-check has not completed yet');
    c.start();
    const pending = c.refusal();
    await new Promise((r) => setTimeout(r, 20));
    release({ ok: true, results: results(['memory_limit']) });
    expect(await pending).toMatch(/memory_limit/);
    await c.stop();
  });

  it('stops waiting for the first verdict when the caller goes away', async () => {
    const c = new SandboxChecker({ run: () => new Promise(() => undefined), intervalSeconds: 3600, accept: [], log });
    const abort = new AbortController();
    const pending = c.refusal(abort.signal);
    abort.abort();
    expect(await pending).toMatch(/still verifying/);
  });

  it('turns a crash of the check into a failed run, never an exception', async () => {
    const c = new SandboxChecker({ run: () => Promise.reject(new Error('boom')), intervalSeconds: 3600, accept: [], log });
    expect(await c.checkNow()).toEqual({ kind: 'failed', problem: 'boom' });
  });
});

describe('SandboxChecker.recheckSoon', () => {
  afterEach(() => vi.useRealTimers());

  it('checks 2 s after a change and once more 30 s later, then resumes the period; a burst is one check', async () => {
    vi.useFakeTimers();
    let runs = 0;
    const c = new SandboxChecker({
      run: () => {
        runs++;
        return Promise.resolve({ ok: true, results: results(runs >= 2 ? ['network'] : []) });
      },
      intervalSeconds: 600,
      accept: [],
      log,
    });
    c.start();
    await vi.advanceTimersByTimeAsync(10);
    expect(runs, 'the check at start').toBe(1);
    c.recheckSoon();
    await vi.advanceTimersByTimeAsync(1000);
    c.recheckSoon();
    await vi.advanceTimersByTimeAsync(1999);
    expect(runs, 'two changes 1 s apart: not yet').toBe(1);
    await vi.advanceTimersByTimeAsync(2);
    expect(runs, '2 s after the last change').toBe(2);
    expect(await c.refusal()).toMatch(/network/);
    await vi.advanceTimersByTimeAsync(30_000);
    expect(runs, 'the follow-up').toBe(3);
    await vi.advanceTimersByTimeAsync(599_000);
    expect(runs, 'then the period, from the follow-up').toBe(3);
    await vi.advanceTimersByTimeAsync(1_001);
    expect(runs).toBe(4);
    await c.stop();
  });

  it('does nothing once stopped', async () => {
    vi.useFakeTimers();
    let runs = 0;
    const c = new SandboxChecker({
      run: (): Promise<CanaryRunResult> => {
        runs++;
        return Promise.resolve({ ok: true, results: results() });
      },
      intervalSeconds: 600,
      accept: [],
      log,
    });
    await c.stop();
    c.recheckSoon();
    await vi.advanceTimersByTimeAsync(60_000);
    expect(runs).toBe(0);
  });
});
