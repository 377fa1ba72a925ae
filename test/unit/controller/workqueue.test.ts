import { describe, expect, it } from 'vitest';
import { WorkQueue } from '../../../src/controller/workqueue.js';

const tick = (ms = 5): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('WorkQueue', () => {
  it('holds keys until start() when created paused, deduped', async () => {
    const seen: string[] = [];
    const q = new WorkQueue(async (k) => void seen.push(k), { workers: 2, startPaused: true });
    q.add('a');
    q.add('b');
    q.add('a');
    await tick(20);
    expect(seen).toEqual([]);
    q.start();
    await q.idle();
    expect(seen).toEqual(['a', 'b']);
  });

  it('dedupes a key added many times while queued', async () => {
    const seen: string[] = [];
    const q = new WorkQueue(
      async (k) => {
        seen.push(k);
        if (k === 'busy') await tick(20);
      },
      { workers: 1 },
    );
    q.add('busy'); // occupies the only worker, so the next adds wait in the queue
    q.add('a');
    q.add('a');
    q.add('b');
    q.add('a');
    await q.idle();
    expect(seen).toEqual(['busy', 'a', 'b']);
  });

  it('never processes one key twice at once, and re-runs a key added while processing', async () => {
    let active = 0;
    let maxActive = 0;
    let runs = 0;
    const q = new WorkQueue(
      async () => {
        active++;
        runs++;
        maxActive = Math.max(maxActive, active);
        await tick(20);
        active--;
      },
      { workers: 4 },
    );
    q.add('k');
    await tick(5);
    q.add('k');
    q.add('k');
    await tick(60);
    await q.idle();
    expect(maxActive).toBe(1);
    expect(runs).toBe(2);
  });

  it('retries a failing key with growing backoff, then forgets the failures after success', async () => {
    const times: number[] = [];
    let failures = 3;
    const errors: string[] = [];
    const q = new WorkQueue(
      async () => {
        times.push(performance.now());
        if (failures-- > 0) throw new Error('boom');
      },
      { workers: 1, baseDelayMs: 10, onError: (_k, e) => errors.push((e as Error).message) },
    );
    q.add('x');
    await tick(200);
    await q.idle();
    expect(times).toHaveLength(4);
    expect(errors).toEqual(['boom', 'boom', 'boom']);
    // Timers never fire early, so each retry waits at least base * 2^n (minus timer rounding).
    const gaps = times.slice(1).map((t, i) => t - (times[i] as number));
    gaps.forEach((gap, n) => expect(gap).toBeGreaterThanOrEqual(10 * 2 ** n - 2));
  });

  it('requeues after the time the handler asks for, keeping the sooner of two delays', async () => {
    const seen: number[] = [];
    let first = true;
    const q = new WorkQueue(
      async () => {
        seen.push(performance.now());
        if (first) {
          first = false;
          return { requeueAfterMs: 30 };
        }
      },
      { workers: 1 },
    );
    q.add('t');
    q.addAfter('t', 10_000);
    await tick(80);
    expect(seen).toHaveLength(2);
    expect((seen[1] as number) - (seen[0] as number)).toBeGreaterThanOrEqual(25);
    q.stop();
  });

  // Node fires a timer past 2^31 - 1 ms after 1 ms: such a delay would reconcile the key every millisecond.
  it.each([
    ['past what a timer holds', 2 ** 40],
    ['infinite', Infinity],
    ['not a number', NaN],
  ])('a delay %s waits, not 1 ms', async (_n, ms) => {
    let runs = 0;
    const q = new WorkQueue(
      async () => {
        runs++;
        return { requeueAfterMs: ms };
      },
      { workers: 1 },
    );
    q.add('t');
    q.addAfter('u', ms);
    await tick(60);
    // 't' ran once and asked for the delay; 'u' waits.
    expect(runs).toBe(1);
    q.stop();
  });

  it('ignores adds after stop', async () => {
    let runs = 0;
    const q = new WorkQueue(async () => void runs++, { workers: 1 });
    q.stop();
    q.add('a');
    await tick(10);
    expect(runs).toBe(0);
  });
});
