// Waiting for a busy session (src/sessions/turns.ts): one caller asks the kernel at a time, in
// arrival order, and every wait ends — at the deadline, when the caller goes away, or at once when
// too many already wait.
import { describe, expect, it } from 'vitest';
import { SessionTurns } from '../../../src/sessions/turns.js';

type Answer = { busy?: true; n: number };

/** A kernel stand-in: busy for the first `busyFor` asks, and records who asked and when it overlapped. */
function kernel(busyFor: number): { ask: (who: string) => () => Promise<Answer>; asks: string[]; overlapped: boolean; release?: () => void } {
  const k = {
    asks: [] as string[],
    overlapped: false,
    inFlight: 0,
    ask: (who: string) => async (): Promise<Answer> => {
      k.asks.push(who);
      if (k.inFlight > 0) k.overlapped = true;
      k.inFlight++;
      await new Promise((r) => setTimeout(r, 5));
      k.inFlight--;
      return k.asks.length <= busyFor ? { busy: true, n: k.asks.length } : { n: k.asks.length };
    },
  };
  return k;
}

const later = (ms: number): number => Date.now() + ms;

describe('SessionTurns', () => {
  it.each([
    ['a free session', 0, 1],
    ['a session busy for three asks', 3, 4],
  ])('runs the call in %s once it is free', async (_name, busyFor, asks) => {
    const turns = new SessionTurns(4);
    const k = kernel(busyFor);
    const r = await turns.take('s', { until: later(5_000) }, k.ask('a'));
    expect(r).toMatchObject({ ran: { n: asks } });
    // Waiting is counted only when the session was busy, and then at least the pauses between asks.
    if (busyFor === 0) expect(r.waitedMs).toBeUndefined();
    else expect(r.waitedMs).toBeGreaterThanOrEqual(10 + 20 + 40);
    expect(k.asks).toHaveLength(asks);
    expect(turns.sessions).toBe(0);
  });

  it('lets the calls of one session ask one at a time, in arrival order', async () => {
    const turns = new SessionTurns(4);
    const k = kernel(2);
    const results = await Promise.all(['a', 'b', 'c'].map((who) => turns.take('s', { until: later(5_000) }, k.ask(who))));
    expect(results.map((r) => ('ran' in r ? r.ran.n : r.gaveUp))).toEqual([3, 4, 5]);
    expect(k.asks).toEqual(['a', 'a', 'a', 'b', 'c']);
    expect(k.overlapped).toBe(false);
    expect(results.every((r) => r.waitedMs !== undefined)).toBe(true);
    expect(turns.sessions).toBe(0);
  });

  it('tells a call once that it waits: when answered busy or queued, never when the session was free', async () => {
    const turns = new SessionTurns(4);
    const k = kernel(2);
    const told: string[] = [];
    const take = (who: string): Promise<unknown> => turns.take('s', { until: later(5_000), onWait: () => told.push(who) }, k.ask(who));
    await Promise.all([take('a'), take('b')]);
    await take('c');
    expect(told).toEqual(['b', 'a']);
  });

  it('lets calls of different sessions ask at the same time', async () => {
    const turns = new SessionTurns(4);
    const k = kernel(0);
    await Promise.all(['s1', 's2'].map((s) => turns.take(s, { until: later(5_000) }, k.ask(s))));
    expect(k.overlapped).toBe(true);
  });

  it('gives up at the deadline while the kernel stays busy, and the calls behind it too', async () => {
    const turns = new SessionTurns(4);
    const k = kernel(Infinity);
    const started = Date.now();
    const [first, second] = await Promise.all([turns.take('s', { until: later(300) }, k.ask('a')), turns.take('s', { until: later(150) }, k.ask('b'))]);
    expect(first).toMatchObject({ gaveUp: 'deadline' });
    expect(second).toMatchObject({ gaveUp: 'deadline' });
    // The second was queued behind the first: it waited, about until its deadline.
    expect(second.waitedMs).toBeGreaterThanOrEqual(140);
    // The second gave up in the queue: it never asked.
    expect(k.asks.every((who) => who === 'a')).toBe(true);
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    expect(turns.sessions).toBe(0);
  });

  it('refuses a call when as many as it allows already wait', async () => {
    const turns = new SessionTurns(1);
    const k = kernel(Infinity);
    const asking = turns.take('s', { until: later(200) }, k.ask('a'));
    const waiting = turns.take('s', { until: later(200) }, k.ask('b'));
    expect(await turns.take('s', { until: later(200) }, k.ask('c'))).toEqual({ gaveUp: 'full', waitedMs: 0 });
    await Promise.all([asking, waiting]);
    expect(k.asks).not.toContain('c');
  });

  it('stops waiting when its caller goes away, in the queue or between asks', async () => {
    const turns = new SessionTurns(4);
    const k = kernel(Infinity);
    const gone = new AbortController();
    const asking = turns.take('s', { until: later(5_000), signal: gone.signal }, k.ask('a'));
    const queued = new AbortController();
    const waiting = turns.take('s', { until: later(5_000), signal: queued.signal }, k.ask('b'));
    await new Promise((r) => setTimeout(r, 50));
    queued.abort();
    expect(await waiting).toMatchObject({ gaveUp: 'aborted' });
    gone.abort();
    expect(await asking).toMatchObject({ gaveUp: 'aborted' });
    expect(k.asks).not.toContain('b');
    expect(turns.sessions).toBe(0);
  });

  it('follows a call that reached the kernel to its result, even when its caller goes away meanwhile', async () => {
    const turns = new SessionTurns(4);
    const gone = new AbortController();
    let finish: (a: Answer) => void = () => undefined;
    const r = turns.take('s', { until: later(50), signal: gone.signal }, () => new Promise<Answer>((resolve) => (finish = resolve)));
    await new Promise((r) => setTimeout(r, 100));
    gone.abort();
    finish({ n: 1 });
    expect(await r).toEqual({ ran: { n: 1 } });
  });

  it('passes on a failed ask and frees the session for the next call', async () => {
    const turns = new SessionTurns(4);
    const failing = turns.take('s', { until: later(1_000) }, () => Promise.reject<Answer>(new Error('stream broke')));
    const next = turns.take('s', { until: later(1_000) }, () => Promise.resolve<Answer>({ n: 7 }));
    await expect(failing).rejects.toThrow('stream broke');
    expect(await next).toMatchObject({ ran: { n: 7 } });
  });
});
