// Call frames on the gateway's KernelStream: a bad call fails only itself, never the stream; the
// answer goes back as a callResult request; bounds on pending calls; unanswerable frames are strays.
import { describe, expect, it } from 'vitest';
import { encodeFrame } from '../../../src/exec/framing.js';
import { KernelStream, type CallHandler } from '../../../src/exec/kernel-stream.js';
import {
  MAX_CALL_FRAME_BYTES,
  MAX_PENDING_CALLS,
  MAX_REFUSED_CALLS,
  REFUSED_CALLS_PER_SECOND,
  callFrameByteBudget,
  failure,
} from '../../../src/codemode/frames.js';
import { MAX_UNREAD_BYTES, UNSOLICITED_MAX_FRAMES } from '../../../src/exec/frames.js';

/**
 * A request on a stream whose clock (ms) is `clock.ms`: 0 unless a test moves it; `unread.bytes`
 * is what the transport says the pod has not taken yet.
 */
function harness(onCall?: CallHandler, capChars = 100, clock = { ms: 0 }, unread = { bytes: 0 }) {
  const sent: Record<string, unknown>[] = [];
  const stream = new KernelStream(
    (frame) => sent.push(JSON.parse(frame.subarray(frame.indexOf(10) + 1).toString('utf8')) as Record<string, unknown>),
    () => undefined,
    undefined,
    () => clock.ms,
    () => unread.bytes,
  );
  const call = stream.request({ op: 'exec', code: '' }, 'result', capChars, 60_000, undefined, onCall);
  call.catch(() => undefined);
  const answers = (): Record<string, unknown>[] => sent.filter((m) => m.op === 'callResult');
  return { stream, answers };
}

const flush = (): Promise<void> => new Promise((r) => setImmediate(r));
const frame = (extra: Record<string, unknown>): Buffer => encodeFrame({ id: '1', type: 'call', callId: 'k1', op: 'servers', ...extra });

describe('call frames on the kernel stream', () => {
  it('answers a call through the handler', async () => {
    const { stream, answers } = harness(() => Promise.resolve({ ok: true, value: ['x'] }));
    stream.receive(frame({}));
    await flush();
    expect(answers()).toEqual([{ op: 'callResult', id: '1', callId: 'k1', ok: true, value: ['x'] }]);
    expect(stream.closed).toBe(false);
  });

  it.each([
    ['a bad op', { op: 'drop' }, 'invalid'],
    ['a bad server name', { op: 'call', server: 'A B', tool: 't' }, 'invalid'],
  ])('fails only the call for %s', async (_name, extra, kind) => {
    const { stream, answers } = harness(() => Promise.resolve({ ok: true, value: null }));
    stream.receive(frame(extra));
    await flush();
    expect(answers()).toMatchObject([{ callId: 'k1', ok: false, error: { kind } }]);
    expect(stream.closed).toBe(false);
  });

  it('fails only the call for a frame above the call bound, even with a tiny output cap', async () => {
    const { stream, answers } = harness(() => Promise.resolve({ ok: true, value: null }), 10);
    stream.receive(frame({ op: 'search', query: 'x'.repeat(MAX_CALL_FRAME_BYTES) }));
    await flush();
    expect(answers()).toMatchObject([{ ok: false, error: { kind: 'invalid', message: expect.stringMatching(/bytes; the limit is/) } }]);
    expect(stream.closed).toBe(false);
  });

  it('says "unavailable" when the request has no handler', async () => {
    const { stream, answers } = harness();
    stream.receive(frame({}));
    await flush();
    expect(answers()).toMatchObject([{ ok: false, error: { kind: 'unavailable' } }]);
  });

  it('turns a handler that rejects into the call failing', async () => {
    const { stream, answers } = harness(() => Promise.reject(new Error('boom')));
    stream.receive(frame({}));
    await flush();
    expect(answers()).toMatchObject([{ ok: false, error: { kind: 'unavailable', message: 'the gateway failed the call: boom' } }]);
  });

  it(`refuses more than ${MAX_PENDING_CALLS} pending calls of one request`, async () => {
    const { stream, answers } = harness(() => new Promise(() => undefined));
    for (let i = 0; i <= MAX_PENDING_CALLS; i++) stream.receive(frame({ callId: `k${i}` }));
    await flush();
    expect(answers()).toMatchObject([{ callId: `k${MAX_PENDING_CALLS}`, ok: false, error: { kind: 'limit' } }]);
  });

  it('counts frames it cannot answer as strays, and fails the stream past their budget', () => {
    const { stream, answers } = harness(() => Promise.resolve({ ok: true, value: null }));
    for (let i = 0; i < UNSOLICITED_MAX_FRAMES; i++) stream.receive(frame({ id: 'nope' }));
    expect(stream.closed).toBe(false);
    stream.receive(frame({ callId: 'bad id' }));
    expect(stream.breach).toMatch(/answered no call/);
    expect(answers()).toEqual([]);
  });

  it(`answers at most ${MAX_REFUSED_CALLS} refused call frames of a request, then counts them as strays`, () => {
    const { stream, answers } = harness(() => Promise.resolve({ ok: true, value: null }));
    for (let i = 0; i < MAX_REFUSED_CALLS + UNSOLICITED_MAX_FRAMES; i++) stream.receive(frame({ op: 'bad', callId: `k${i}` }));
    expect(stream.closed).toBe(false);
    expect(answers()).toHaveLength(MAX_REFUSED_CALLS);
    stream.receive(frame({ op: 'bad', callId: 'one-more' }));
    expect(stream.breach).toMatch(/answered no call/);
  });

  it.each([['denied'], ['limit'], ['invalid']] as const)(
    'counts calls the broker refuses (%s) like its own, so a flood of them ends as strays',
    async (kind) => {
      const { stream, answers } = harness(() => Promise.resolve(failure(kind, 'no')));
      // One frame at a time, each answered before the next comes: as a program that waits.
      for (let i = 0; i < MAX_REFUSED_CALLS + UNSOLICITED_MAX_FRAMES; i++) {
        stream.receive(frame({ callId: `k${i}` }));
        await flush();
      }
      expect(stream.closed).toBe(false);
      expect(answers()).toHaveLength(MAX_REFUSED_CALLS);
      stream.receive(frame({ callId: 'one-more' }));
      expect(stream.breach).toMatch(/answered no call/);
    },
  );

  it(`answers ${REFUSED_CALLS_PER_SECOND} more refused calls for every second the request runs`, async () => {
    const clock = { ms: 0 };
    const { stream, answers } = harness(() => Promise.resolve(failure('limit', 'no')), 100, clock);
    const n = 3 * MAX_REFUSED_CALLS;
    for (let i = 0; i < n; i++) {
      // A loop that retries at the rate the budget allows, after using up the first MAX_REFUSED_CALLS.
      if (i >= MAX_REFUSED_CALLS) clock.ms = ((i - MAX_REFUSED_CALLS + 1) * 1000) / REFUSED_CALLS_PER_SECOND;
      stream.receive(frame({ callId: `k${i}` }));
      await flush();
    }
    expect(stream.closed).toBe(false);
    expect(answers()).toHaveLength(n);
  });

  it('never counts answered calls, however many', async () => {
    const { stream, answers } = harness(() => Promise.resolve({ ok: true, value: 1 }));
    for (let i = 0; i < 3 * MAX_REFUSED_CALLS; i++) {
      stream.receive(frame({ callId: `k${i}` }));
      await flush();
    }
    expect(stream.closed).toBe(false);
    expect(answers()).toHaveLength(3 * MAX_REFUSED_CALLS);
  });

  it.each<[string, number]>([
    ['at once', 0],
    ['over 10 s', 10_000],
  ])('fails the stream past the call frame byte budget (%s), answered calls or not', async (_when, ms) => {
    const clock = { ms: 0 };
    const { stream, answers } = harness(() => Promise.resolve({ ok: true, value: 1 }), 100, clock);
    const big = (i: number): Buffer => frame({ callId: `k${i}`, op: 'search', query: 'q', pad: 'x'.repeat(512 * 1024) });
    const perFrame = big(0).length;
    const fit = Math.floor(callFrameByteBudget(ms) / perFrame);
    for (let i = 0; i < fit; i++) {
      clock.ms = (ms * i) / fit;
      stream.receive(big(i));
      await flush();
    }
    expect(stream.closed).toBe(false);
    expect(answers()).toHaveLength(fit);
    clock.ms = ms;
    stream.receive(big(fit));
    stream.receive(big(fit + 1));
    expect(stream.breach).toMatch(/bytes of tool call frames/);
  });

  it(`fails the stream when the pod leaves more than ${MAX_UNREAD_BYTES} bytes of answers unread`, async () => {
    const unread = { bytes: 0 };
    const { stream, answers } = harness(() => Promise.resolve({ ok: true, value: 1 }), 100, { ms: 0 }, unread);
    stream.receive(frame({ callId: 'k0' }));
    await flush();
    unread.bytes = MAX_UNREAD_BYTES;
    stream.receive(frame({ callId: 'k1' }));
    await flush();
    expect(answers()).toHaveLength(2);
    expect(stream.closed).toBe(false);
    unread.bytes = MAX_UNREAD_BYTES + 1;
    stream.receive(frame({ callId: 'k2' }));
    await flush();
    expect(answers()).toHaveLength(2);
    expect(stream.breach).toMatch(/bytes of answers unread/);
  });

  it('drops an answer whose request finished meanwhile', async () => {
    let release: () => void = () => undefined;
    const { stream, answers } = harness(() => new Promise((r) => (release = () => r({ ok: true, value: 1 }))));
    stream.receive(frame({}));
    stream.receive(
      encodeFrame({ id: '1', type: 'result', status: 'ok', stdout: '', stderr: '', stdoutBytes: 0, stderrBytes: 0, truncated: false, durationMs: 1 }),
    );
    release();
    await flush();
    expect(answers()).toEqual([]);
  });
});
