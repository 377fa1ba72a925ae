// The gateway's data path from a kernel (KernelStream, as KernelConnection drives it): answers
// reach their calls, and whatever a hostile pod sends fails only its own stream, never throws.
import { describe, expect, it } from 'vitest';
import { encodeFrame } from '../../../src/exec/framing.js';
import { KernelConnectionError, KernelProtocolError, KernelStream } from '../../../src/exec/kernel-stream.js';
import { DEFAULT_DISPLAY_LIMITS, displayFrameBytes } from '../../../src/exec/display.js';
import {
  IDLE_MAX_FRAME_BYTES,
  MAX_RETRIED_ANSWER_BYTES,
  OUTPUT_FRAMES_PER_SECOND,
  frameBudget,
  maxFrameBytes,
  streamBudgetChars,
  UNSOLICITED_MAX_FRAMES,
} from '../../../src/exec/frames.js';

const CAP = 100;

function harness(): { stream: KernelStream; sent: Record<string, unknown>[]; closed: () => number } {
  const sent: Record<string, unknown>[] = [];
  let closes = 0;
  const stream = new KernelStream(
    (frame) => sent.push(JSON.parse(frame.subarray(frame.indexOf(10) + 1).toString('utf8')) as Record<string, unknown>),
    () => closes++,
  );
  return { stream, sent, closed: () => closes };
}

const ok = (id: string, extra: Record<string, unknown> = {}): Buffer =>
  encodeFrame({ id, type: 'result', status: 'ok', stdout: '', stderr: '', stdoutBytes: 0, stderrBytes: 0, truncated: false, durationMs: 1, ...extra });

type Answered = { outcome: PromiseSettledResult<unknown>; output: string[]; stream: KernelStream; closes: number };

/** A call (an exec) answered with `chunks`. */
const callWith = (...chunks: Buffer[]): Promise<Answered> => answer({ op: 'exec', code: '' }, chunks);

async function answer(message: Record<string, unknown>, chunks: Buffer[]): Promise<Answered> {
  const { stream, closed } = harness();
  const output: string[] = [];
  const call = stream.request(message, 'result', CAP, 60_000, (s, t) => output.push(`${s}:${t}`));
  for (const c of chunks) stream.receive(c);
  stream.fail('end of test'); // settles a call that got no answer
  const [outcome] = await Promise.allSettled([call]);
  return { outcome: outcome as PromiseSettledResult<unknown>, output, stream, closes: closed() };
}

describe('KernelStream', () => {
  it('streams output and resolves the call with its result', async () => {
    const { outcome, output } = await callWith(
      encodeFrame({ id: '1', type: 'output', stream: 'stdout', text: 'hi\n' }),
      ok('1', { stdout: 'hi\n', stdoutBytes: 3 }),
    );
    expect(outcome).toMatchObject({ status: 'fulfilled', value: { status: 'ok', stdout: 'hi\n', stdoutBytes: 3 } });
    expect(output).toEqual(['stdout:hi\n']);
  });

  it('takes output frames whose text is all escapes, as the kernels write them', async () => {
    // Python's json escapes every non-ASCII character (an astral one as two \u escapes, 6 bytes a
    // UTF-16 unit); either kernel writes a control character as a six-byte \u escape.
    const py = (text: string): Buffer => {
      const body = Buffer.from(`{"id": "1", "type": "output", "stream": "stdout", "text": "${text}"}`);
      return Buffer.concat([Buffer.from(`${body.length}\n`), body]);
    };
    const { outcome, stream } = await callWith(
      py('\\ud83d\\ude00'.repeat(40)),
      py('\\u00e9'.repeat(40)),
      encodeFrame({ id: '1', type: 'output', stream: 'stderr', text: '\u0001'.repeat(80) }),
      ok('1'),
    );
    expect(stream.breach).toBeUndefined();
    expect(outcome).toMatchObject({ status: 'fulfilled' });
  });

  it('answers a ping with its pong', async () => {
    const { stream, sent } = harness();
    const ping = stream.request({ op: 'ping' }, 'pong', 0, 1000);
    stream.receive(encodeFrame({ id: String(sent[0]?.id), type: 'pong', busy: false }));
    await expect(ping).resolves.toBeUndefined();
    expect(stream.closed).toBe(false);
  });

  it('passes on at most the cap of streamed output per stream', async () => {
    const { output } = await callWith(
      encodeFrame({ id: '1', type: 'output', stream: 'stdout', text: 'a'.repeat(80) }),
      encodeFrame({ id: '1', type: 'output', stream: 'stdout', text: 'b'.repeat(80) }),
      encodeFrame({ id: '1', type: 'output', stream: 'stderr', text: 'c'.repeat(10) }),
    );
    expect(output).toEqual([`stdout:${'a'.repeat(80)}`, `stdout:${'b'.repeat(20)}`, `stderr:${'c'.repeat(10)}`]);
  });

  it.each([
    ['the frame 4\\nnull', [Buffer.from('4\nnull')], /not a kernel frame/],
    ['a malformed header', [Buffer.from('hello\n')], /Malformed frame header/],
    ['a body that is not JSON', [Buffer.from('3\n{{{')], /JSON/],
    [
      'a frame above the limit for the call',
      [Buffer.from(`${Math.max(IDLE_MAX_FRAME_BYTES, maxFrameBytes(CAP), displayFrameBytes(DEFAULT_DISPLAY_LIMITS)) + 1}\n`)],
      /exceeds the limit/,
    ],
    ['a 64 MiB frame header', [Buffer.from(`${64 * 1024 * 1024}\n`)], /exceeds the limit/],
    ['a result of the wrong shape', [ok('1', { stdoutBytes: -5 })], /not a kernel frame at "stdoutBytes"/],
    ['a pong for a call', [encodeFrame({ id: '1', type: 'pong' })], /a pong frame answered a call/],
    [
      'an output flood',
      Array.from({ length: 20 }, () => encodeFrame({ id: '1', type: 'output', stream: 'stdout', text: 'z'.repeat(streamBudgetChars(CAP) / 10) })),
      /streamed more than/,
    ],
    [
      'a frame a byte per message',
      [...encodeFrame({ id: '1', type: 'output', stream: 'stdout', text: 't'.repeat(5000) })].map((b) => Buffer.from([b])),
      /A frame came in more than \d+ pieces/,
    ],
    // Within the characters' budget, but more frames than any kernel sends: each costs a parse.
    [
      'a flood of empty output frames',
      Array.from({ length: 1000 }, () => encodeFrame({ id: '1', type: 'output', stream: 'stdout', text: '' })),
      /output and display frames in/,
    ],
    [
      'a flood of one-character output frames',
      [Buffer.concat(Array.from({ length: 1000 }, () => encodeFrame({ id: '1', type: 'output', stream: 'stderr', text: 'e' })))],
      /output and display frames in/,
    ],
    [
      'a flood of display frames past the item cap',
      Array.from({ length: 1000 }, () => encodeFrame({ id: '1', type: 'display', kind: 'text', format: 'note', text: 'n' })),
      /more than \d+ display frames \(a kernel sends at most 10 items and a note\)/,
    ],
    // Within every count, but each frame a parse of megabytes that carries no text the budgets count.
    [
      'an output frame padded with keys the schema drops',
      [encodeFrame({ id: '1', type: 'output', stream: 'stdout', text: '', ...Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`k${i}`, 0])) })],
      /an output frame of \d+ bytes carried only 0 characters of text/,
    ],
    [
      'an output frame padded with whitespace',
      [
        (() => {
          const body = Buffer.from(`{"id": "1", "type": "output", "stream": "stdout", "text": "x"${' '.repeat(10_000)}}`);
          return Buffer.concat([Buffer.from(`${body.length}\n`), body]);
        })(),
      ],
      /an output frame of \d+ bytes carried only 1 characters of text/,
    ],
    // Few frames, each as large as the decoder takes: each one a parse of megabytes on the gateway's thread.
    [
      'display frames of the largest size',
      Array.from({ length: 10 }, () =>
        encodeFrame({ id: '1', type: 'display', kind: 'text', format: 'note', text: 'n'.repeat(displayFrameBytes(DEFAULT_DISPLAY_LIMITS) - 100) }),
      ),
      /more than \d+ bytes of display frames/,
    ],
    // A busy answer or an error frame is followed by a fresh request with budgets of its own: only a
    // small one that comes before anything of the call is taken as such.
    ...(() => {
      const busy = (extra: Record<string, unknown> = {}): Buffer =>
        ok('1', { status: 'error', busy: true, error: { ename: 'KernelBusy', evalue: 'another call is running', traceback: '' }, ...extra });
      const out = encodeFrame({ id: '1', type: 'output', stream: 'stdout', text: 'x' });
      const note = encodeFrame({ id: '1', type: 'display', kind: 'text', format: 'note', text: 'n' });
      const error = (message: string): Buffer => encodeFrame({ type: 'error', message });
      return [
        ['a busy answer after output', [out, busy()], /answered busy in \d+ bytes after the call had started/],
        ['a busy answer after a display frame', [note, busy()], /answered busy in \d+ bytes after the call had started/],
        ['a busy answer padded past MAX_RETRIED_ANSWER_BYTES', [busy({ pad: 'p'.repeat(MAX_RETRIED_ANSWER_BYTES) })], /answered busy in \d+ bytes \(/],
        ['an error frame after output', [out, error('bad frame')], /an error frame of \d+ bytes after a call's output/],
        ['an error frame past MAX_RETRIED_ANSWER_BYTES', [error('e'.repeat(MAX_RETRIED_ANSWER_BYTES))], /an error frame of \d+ bytes \(/],
      ] as [string, Buffer[], RegExp][];
    })(),
    [
      'a display frame above 1 MiB made of nested arrays',
      [
        (() => {
          const body = Buffer.from(
            `{"id": "1", "type": "display", "kind": "text", "format": "note", "text": "n", "pad": ${'['.repeat(600_000)}${']'.repeat(600_000)}}`,
          );
          return Buffer.concat([Buffer.from(`${body.length}\n`), body]);
        })(),
      ],
      /holds more than 64 objects and arrays/,
    ],
    ['a flood of frames for unknown ids', Array.from({ length: UNSOLICITED_MAX_FRAMES + 1 }, (_, i) => ok(`x${i}`)), /answered no call/],
    [
      'big frames for unknown ids',
      Array.from({ length: 5 }, () => encodeFrame({ id: 'x', type: 'output', stream: 'stdout', text: 'q'.repeat(14_000) })),
      /answered no call/,
    ],
  ])('fails only this stream on %s, with a clear error for the call', async (_name, chunks, why) => {
    const { outcome, stream, closes } = await callWith(...chunks);
    expect(outcome.status).toBe('rejected');
    const err = (outcome as PromiseRejectedResult).reason as Error;
    expect(err).toBeInstanceOf(KernelProtocolError);
    expect(err.message).toMatch(/^the sandbox broke the kernel protocol: /);
    expect(err.message).toMatch(why);
    expect(stream.breach).toMatch(why);
    expect(closes).toBe(1);
    await expect(stream.request({ op: 'ping' }, 'pong', 0, 1000)).rejects.toBeInstanceOf(KernelProtocolError);
  });

  it("tolerates a few stray frames (a finished call's id) without failing", async () => {
    const { outcome } = await callWith(ok('0'), ok('7'), ok('1'));
    expect(outcome.status).toBe('fulfilled');
  });

  it('ends with a plain connection error when the kernel rejects our framing', async () => {
    const { outcome, stream } = await callWith(encodeFrame({ type: 'error', message: 'malformed frame header' }));
    const err = (outcome as PromiseRejectedResult).reason as Error;
    expect(err).toBeInstanceOf(KernelConnectionError);
    expect(err).not.toBeInstanceOf(KernelProtocolError);
    expect(stream.breach).toBeUndefined();
  });

  it('takes a busy answer that comes first, as an honest kernel sends it, as busy', async () => {
    const { outcome, stream } = await callWith(
      ok('1', {
        status: 'error',
        busy: true,
        error: { ename: 'KernelBusy', evalue: 'another call is running in this session; retry when it has finished', traceback: '' },
      }),
    );
    expect(stream.breach).toBeUndefined();
    expect(outcome).toMatchObject({ status: 'fulfilled', value: { status: 'error', busy: true } });
  });

  it('re-caps the result whatever the kernel claims', async () => {
    const { outcome } = await callWith(
      ok('1', { stdout: 'o'.repeat(500), stdoutBytes: 1, result: 'r'.repeat(500), error: { ename: 'E', evalue: 'v'.repeat(500), traceback: '' } }),
    );
    expect(outcome).toMatchObject({
      status: 'fulfilled',
      value: { stdout: 'o'.repeat(CAP), stdoutBytes: CAP, result: 'r'.repeat(CAP), truncated: true, error: { evalue: 'v'.repeat(CAP) } },
    });
  });

  // A recall's answer (a replica reading back a run whose executor stopped) comes from the pod like
  // any result: the same bounds, and a lie fails or cuts only this stream's answer.
  it.each([
    [
      'a recalled result over the cap',
      [ok('1', { stdout: 'o'.repeat(500), stdoutBytes: 500 })],
      { status: 'fulfilled', value: { stdout: 'o'.repeat(CAP), truncated: true } },
    ],
    ['a forged notFound on a success (dropped)', [ok('1', { notFound: true })], { status: 'fulfilled', value: { status: 'ok' } }],
    ['a notFound that is not a boolean', [ok('1', { status: 'error', notFound: 'yes' })], { status: 'rejected' }],
    ['a frame above the limit', [Buffer.from(`${64 * 1024 * 1024}\n`)], { status: 'rejected' }],
    ['a flood of answers for other ids', Array.from({ length: UNSOLICITED_MAX_FRAMES + 1 }, (_, i) => ok(`x${i}`)), { status: 'rejected' }],
  ])('reads %s in answer to a recall as it reads any result', async (_name, chunks, expected) => {
    const { outcome, stream } = await answer({ op: 'recall', key: 'run-a' }, chunks);
    expect(outcome).toMatchObject(expected);
    if (outcome.status === 'rejected') {
      expect((outcome as PromiseRejectedResult).reason).toBeInstanceOf(KernelProtocolError);
      expect(stream.breach).toBeDefined();
    } else {
      // Only an error answer can say the kernel never ran the run.
      expect(outcome.value).not.toHaveProperty('notFound');
      expect(stream.breach).toBeUndefined();
    }
  });

  it("keeps a listener's exception away from the stream", async () => {
    const { stream } = harness();
    const call = stream.request({ op: 'exec' }, 'result', CAP, 60_000, () => {
      throw new Error('client went away');
    });
    stream.receive(encodeFrame({ id: '1', type: 'output', stream: 'stdout', text: 'x' }));
    stream.receive(ok('1'));
    await expect(call).resolves.toMatchObject({ status: 'ok' });
  });
});

/** Deterministic PRNG (mulberry32), so a failing case can be replayed from its seed. */
function rng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomJson(r: () => number, depth = 0): unknown {
  const pick = Math.floor(r() * (depth > 3 ? 6 : 9));
  const keys = ['id', 'type', 'stream', 'text', 'status', 'stdout', 'stderr', 'stdoutBytes', 'truncated', 'error', 'durationMs', 'x'];
  const values: unknown[] = [null, true, 0, -1, 1.5, 1e308, '', '1', 'result', 'output', 'pong', 'stdout', 'ok'];
  switch (pick) {
    case 0:
      return values[Math.floor(r() * values.length)];
    case 1:
      return Math.floor(r() * 1e6) - 5e5;
    case 2:
      return String.fromCharCode(...Array.from({ length: Math.floor(r() * 20) }, () => Math.floor(r() * 0xffff)));
    case 3:
      return r() < 0.5;
    case 4:
      return null;
    case 5:
      return '1';
    case 6:
      return Array.from({ length: Math.floor(r() * 4) }, () => randomJson(r, depth + 1));
    default:
      return Object.fromEntries(Array.from({ length: Math.floor(r() * 8) }, () => [keys[Math.floor(r() * keys.length)], randomJson(r, depth + 1)]));
  }
}

function randomSplits(r: () => number, buf: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let off = 0; off < buf.length;) {
    const n = 1 + Math.floor(r() * 64);
    out.push(buf.subarray(off, off + n));
    off += n;
  }
  return out;
}

describe('KernelStream fuzz: nothing a pod sends throws out of the stream handler', () => {
  const inputs: [string, (r: () => number) => Buffer][] = [
    ['random bytes', (r) => Buffer.from(Array.from({ length: 1 + Math.floor(r() * 200) }, () => Math.floor(r() * 256)))],
    ['random digits and newlines', (r) => Buffer.from(Array.from({ length: 1 + Math.floor(r() * 60) }, () => '0123456789\n{}'[Math.floor(r() * 13)]).join(''))],
    ['random JSON in valid frames', (r) => Buffer.concat(Array.from({ length: 1 + Math.floor(r() * 5) }, () => encodeFrame(randomJson(r))))],
    [
      'valid frames with random corruption',
      (r) => {
        const b = Buffer.concat([encodeFrame({ id: '1', type: 'output', stream: 'stdout', text: 'abc' }), ok('1')]);
        for (let i = 0; i < 3; i++) b[Math.floor(r() * b.length)] = Math.floor(r() * 256);
        return b;
      },
    ],
  ];

  it.each(inputs)('%s, randomly split', async (_name, make) => {
    for (let seed = 1; seed <= 300; seed++) {
      const r = rng(seed);
      const { stream } = harness();
      const call = stream.request({ op: 'exec' }, 'result', CAP, 60_000, () => undefined);
      call.catch(() => undefined);
      const chunks = randomSplits(r, make(r));
      expect(() => chunks.forEach((c) => stream.receive(c)), `seed ${seed}`).not.toThrow();
      stream.fail('end of case');
      await Promise.allSettled([call]);
    }
  });
});

describe('KernelStream display frames', () => {
  const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452000000100000000808060000', 'hex').toString('base64');
  const display = (id: string, extra: Record<string, unknown>): Buffer => encodeFrame({ id, type: 'display', ...extra });

  it('attaches the call’s images and notes to its result, and a bad one breaks nothing', async () => {
    const { outcome, stream, closes } = await callWith(
      display('1', { kind: 'image', mime: 'image/png', data: PNG }),
      display('1', { kind: 'image', mime: 'image/gif', data: 'R0lGODlh' }),
      display('1', { kind: 'bogus' }),
      ok('1'),
    );
    expect(outcome).toMatchObject({
      status: 'fulfilled',
      value: {
        status: 'ok',
        display: [
          { kind: 'image', mime: 'image/png', width: 16, height: 8 },
          { kind: 'text', format: 'note', text: expect.stringContaining('only PNG and JPEG') },
          { kind: 'text', format: 'note', text: expect.stringContaining('not a valid display frame') },
        ],
      },
    });
    expect(stream.breach).toBeUndefined();
    expect(closes).toBe(1); // only the test's own fail()
  });

  it('accepts a display frame larger than the call’s text bound, up to an image at the cap', async () => {
    const big = Buffer.concat([Buffer.from(PNG, 'base64'), Buffer.alloc(200_000)]).toString('base64');
    expect(big.length).toBeGreaterThan(maxFrameBytes(CAP));
    const { outcome } = await callWith(display('1', { kind: 'image', mime: 'image/png', data: big }), ok('1'));
    expect(outcome).toMatchObject({ status: 'fulfilled', value: { display: [{ kind: 'image', bytes: 200_000 + 28 }] } });
  });

  it('fails the stream for a display frame above every bound, and counts one for no call as a stray', async () => {
    const huge = 'A'.repeat(4 * 1024 * 1024);
    const { outcome, stream } = await callWith(display('1', { kind: 'image', mime: 'image/png', data: huge }));
    expect(outcome).toMatchObject({ status: 'rejected', reason: expect.any(KernelProtocolError) });
    expect(stream.breach).toMatch(/exceeds the limit/);
    const strays = await callWith(...Array.from({ length: UNSOLICITED_MAX_FRAMES + 1 }, () => display('9', { kind: 'text', format: 'html', text: 'x' })));
    expect(strays.stream.breach).toMatch(/answered no call/);
  });

  it('lets a kernel send all its caps allow: images to the bytes per call, texts to capChars at the worst escape, a note', async () => {
    const cap = 50_000;
    const L = DEFAULT_DISPLAY_LIMITS;
    const stream = new KernelStream(
      () => undefined,
      () => undefined,
    );
    const call = stream.request({ op: 'exec', code: '' }, 'result', cap, 60_000);
    const png = (bytes: number): string => Buffer.concat([Buffer.from(PNG, 'base64'), Buffer.alloc(bytes - 28)]).toString('base64');
    const images = [L.maxImageBytes, L.maxImageBytes, L.maxBytes - 2 * L.maxImageBytes].map((b) =>
      display('1', { kind: 'image', mime: 'image/png', data: png(b) }),
    );
    // The rest are texts sharing capChars, as Python's json writes them: an astral character as two \u escapes (12 bytes).
    const texts = L.maxItems - images.length;
    const pyText = (chars: number): Buffer => {
      const body = Buffer.from(`{"id": "1", "type": "display", "kind": "text", "format": "html", "text": "${'\\ud83d\\ude00'.repeat(chars)}"}`);
      return Buffer.concat([Buffer.from(`${body.length}\n`), body]);
    };
    const frames = [
      ...images,
      ...Array.from({ length: texts }, () => pyText(Math.ceil(cap / texts))),
      display('1', { kind: 'text', format: 'note', text: 'n'.repeat(500) }),
    ];
    for (const f of frames) stream.receive(f);
    stream.receive(ok('1'));
    const outcome = (await Promise.allSettled([call]))[0];
    expect(stream.breach).toBeUndefined();
    expect(outcome).toMatchObject({ status: 'fulfilled', value: { display: expect.any(Array) } });
    expect((outcome as PromiseFulfilledResult<{ display: unknown[] }>).value.display).toHaveLength(L.maxItems + 1);
  });

  it('sends the display caps with every call', () => {
    const { stream, sent } = harness();
    void stream.request({ op: 'exec', code: '' }, 'result', CAP, 60_000).catch(() => undefined);
    expect(sent[0]).toMatchObject({ displayMaxImageBytes: 2 * 1024 * 1024, displayMaxBytes: 5 * 1024 * 1024, displayMaxItems: 10 });
    stream.fail('end of test');
  });
});

describe('KernelStream frame budget: frames of a call, counted against the time since it was sent', () => {
  /** A call on a stream whose clock is `clock.ms`, its output and display frames sent as `frames` says. */
  async function paced(frames: Array<{ atMs: number; frame: Buffer }>): Promise<PromiseSettledResult<unknown>> {
    const clock = { ms: 1_000 };
    const stream = new KernelStream(
      () => undefined,
      () => undefined,
      DEFAULT_DISPLAY_LIMITS,
      () => clock.ms,
    );
    const call = stream.request({ op: 'exec', code: '' }, 'result', 50_000, 600_000);
    for (const f of frames) {
      clock.ms = 1_000 + f.atMs;
      stream.receive(f.frame);
    }
    stream.receive(ok('1'));
    stream.fail('end of test');
    const [outcome] = await Promise.allSettled([call]);
    return outcome as PromiseSettledResult<unknown>;
  }
  const out = (text: string): Buffer => encodeFrame({ id: '1', type: 'output', stream: 'stdout', text });
  const err = (text: string): Buffer => encodeFrame({ id: '1', type: 'output', stream: 'stderr', text });
  const item = encodeFrame({ id: '1', type: 'display', kind: 'text', format: 'markdown', text: '# t' });

  it('lets a kernel that flushes both streams every 20 ms for a minute, with its display items, finish', async () => {
    const frames = Array.from({ length: 3_000 }, (_, i) => [
      { atMs: i * 20, frame: out('o') },
      { atMs: i * 20, frame: err('e') },
    ]).flat();
    const items = Array.from({ length: DEFAULT_DISPLAY_LIMITS.maxItems + 1 }, () => ({ atMs: 60_000, frame: item }));
    expect(await paced([...frames, ...items])).toMatchObject({ status: 'fulfilled' });
  });

  it('lets all of that arrive at once, late, as a slow stream would deliver it', async () => {
    const frames = Array.from({ length: 6_000 }, (_, i) => ({ atMs: 60_000, frame: i % 2 ? out('o') : err('e') }));
    expect(await paced(frames)).toMatchObject({ status: 'fulfilled' });
  });

  it('fails the stream when the same frames come within a second', async () => {
    const frames = Array.from({ length: 6_000 }, (_, i) => ({ atMs: i / 6, frame: i % 2 ? out('o') : err('e') }));
    const outcome = await paced(frames);
    expect(outcome.status).toBe('rejected');
    expect(String((outcome as PromiseRejectedResult).reason)).toMatch(/more than \d+ output and display frames in 0\.\d s/);
  });

  it.each([
    [50_000, 10, 0],
    [50_000, 10, 1_000],
    [50_000, 10, 300_000],
    [100, 0, 0],
    [1_000_000, 100, 5_000],
  ])('covers twice what a kernel sends at most (cap %i, %i display items, after %i ms)', (cap, items, ms) => {
    const kernelMost = 2 * (Math.ceil((2 * cap) / 16_384) + 2) + items + 1 + (OUTPUT_FRAMES_PER_SECOND * ms) / 1000;
    expect(frameBudget(cap, items, ms)).toBeGreaterThanOrEqual(2 * kernelMost);
    expect(frameBudget(cap, items, ms)).toBeLessThanOrEqual(2 * kernelMost + 65);
  });
});
