import { describe, expect, it } from 'vitest';
import { CallGate, MAX_WAITING_PER_USER } from '../../../src/upstreams/call-gate.js';
import { UpstreamError } from '../../../src/upstreams/types.js';

/** Lets every settled promise's callbacks run. */
const flush = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Starts calls in order and records the order in which they get their place. */
function starter(gate: CallGate, server = 's') {
  const granted: string[] = [];
  const releases = new Map<string, () => void>();
  const errors = new Map<string, string>();
  const start = (id: string, user: string, signal?: AbortSignal): void => {
    gate.acquire(server, user, signal).then(
      (release) => {
        granted.push(id);
        releases.set(id, release);
      },
      (err: unknown) => errors.set(id, err instanceof UpstreamError ? err.code : String(err)),
    );
  };
  const end = async (id: string): Promise<void> => {
    releases.get(id)?.();
    await flush();
  };
  return { granted, errors, start, end };
}

describe('CallGate', () => {
  it.each([
    // [limits, calls as user names in order, how many get a place at once]
    [{ perServer: 4, perUser: 2 }, ['a', 'a', 'a', 'b', 'b', 'b'], ['a1', 'a2', 'b4', 'b5']],
    [{ perServer: 3, perUser: 3 }, ['a', 'a', 'a', 'b'], ['a1', 'a2', 'a3']],
    [{ perServer: 10, perUser: 1 }, ['a', 'b', 'c', 'a'], ['a1', 'b2', 'c3']],
    [{ perServer: 1, perUser: 1 }, ['a', 'b'], ['a1']],
  ])('%j: %j start %j at once', async (limits, users, now) => {
    const gate = new CallGate(limits);
    const s = starter(gate);
    users.forEach((u, i) => s.start(`${u}${i + 1}`, u));
    await flush();
    expect(s.granted).toEqual(now);
    expect(gate.stats('s')).toEqual({ active: now.length, waiting: users.length - now.length });
  });

  it('gives a freed place to the waiting users in turn, not to whoever queued most', async () => {
    const gate = new CallGate({ perServer: 2, perUser: 2 });
    const s = starter(gate);
    // a fills the server and queues eight more; b and c queue one each after that.
    for (let i = 1; i <= 10; i++) s.start(`a${i}`, 'a');
    s.start('b1', 'b');
    s.start('c1', 'c');
    await flush();
    expect(s.granted).toEqual(['a1', 'a2']);
    await s.end('a1');
    await s.end('a2');
    await s.end('a3');
    // a's next one came first in line; then b, then c, then a again.
    expect(s.granted).toEqual(['a1', 'a2', 'a3', 'b1', 'c1']);
    await s.end('b1');
    expect(s.granted.at(-1)).toBe('a4');
  });

  it('keeps a user at their cap while the server has room, and lets others in', async () => {
    const gate = new CallGate({ perServer: 8, perUser: 2 });
    const s = starter(gate);
    for (let i = 1; i <= 5; i++) s.start(`a${i}`, 'a');
    s.start('b1', 'b');
    await flush();
    expect(s.granted).toEqual(['a1', 'a2', 'b1']);
    await s.end('b1');
    expect(s.granted).toEqual(['a1', 'a2', 'b1']);
    await s.end('a2');
    expect(s.granted).toEqual(['a1', 'a2', 'b1', 'a3']);
  });

  it('keeps servers apart: a full one does not hold another back', async () => {
    const gate = new CallGate({ perServer: 1, perUser: 1 });
    const one = starter(gate, 'one');
    const two = starter(gate, 'two');
    one.start('x', 'a');
    one.start('y', 'a');
    two.start('z', 'a');
    await flush();
    expect([one.granted, two.granted]).toEqual([['x'], ['z']]);
  });

  it.each([
    ['a timeout', () => AbortSignal.timeout(5), 'timeout'],
    ['the run ended', () => AbortSignal.abort(new Error('the run ended')), 'aborted'],
  ])('a waiting call leaves the line when its signal aborts (%s), and frees nothing', async (_name, signal, code) => {
    const gate = new CallGate({ perServer: 1, perUser: 1 });
    const s = starter(gate);
    s.start('first', 'a');
    s.start('waits', 'b', signal());
    s.start('after', 'c');
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(s.errors.get('waits')).toBe(code);
    expect(gate.stats('s')).toEqual({ active: 1, waiting: 1 });
    await s.end('first');
    expect(s.granted).toEqual(['first', 'after']);
  });

  it('refuses a call at once when too many of the user’s calls wait already', async () => {
    const gate = new CallGate({ perServer: 1, perUser: 1 });
    const s = starter(gate);
    for (let i = 0; i <= MAX_WAITING_PER_USER + 1; i++) s.start(`a${i}`, 'a');
    s.start('b', 'b');
    await flush();
    expect(s.errors.get(`a${MAX_WAITING_PER_USER + 1}`)).toBe('busy');
    expect(s.errors.size).toBe(1);
    expect(gate.stats('s')).toEqual({ active: 1, waiting: MAX_WAITING_PER_USER + 1 });
  });

  it('tells its observer the counts of a server after each change', async () => {
    const seen: string[] = [];
    const gate = new CallGate({ perServer: 1, perUser: 1 }, (server, c) => seen.push(`${server}:${c.active}/${c.waiting}`));
    const s = starter(gate);
    s.start('first', 'a');
    s.start('second', 'b');
    s.start('gone', 'c', AbortSignal.timeout(5));
    await new Promise((resolve) => setTimeout(resolve, 20));
    await s.end('first');
    await s.end('second');
    expect(seen).toEqual(['s:1/0', 's:1/1', 's:1/2', 's:1/1', 's:1/0', 's:0/0']);
  });

  it('releases once, however often release is called, and forgets an idle server', async () => {
    const gate = new CallGate({ perServer: 2, perUser: 2 });
    const r1 = await gate.acquire('s', 'a');
    const r2 = await gate.acquire('s', 'a');
    r1();
    r1();
    expect(gate.stats('s')).toEqual({ active: 1, waiting: 0 });
    r2();
    expect(gate.stats('s')).toEqual({ active: 0, waiting: 0 });
    expect((gate as unknown as { lines: Map<string, unknown> }).lines.size).toBe(0);
    expect(gate.tryAcquire('s', 'a')).toBeTypeOf('function');
  });

  it('tryAcquire never overtakes a user’s own calls in line', async () => {
    const gate = new CallGate({ perServer: 1, perUser: 1 });
    const s = starter(gate);
    s.start('first', 'a');
    s.start('second', 'a');
    await flush();
    await s.end('first');
    expect(s.granted).toEqual(['first', 'second']);
    expect(gate.tryAcquire('s', 'a')).toBeUndefined();
  });
});
