// Frame validation, the gateway's own cap on kernel texts, and the bounds derived from the cap.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import {
  MAX_ENAME_CHARS,
  capText,
  maxFrameBytes,
  maxOutputFrameBytes,
  parseKernelFrame,
  passedNetcheck,
  sanitizeResult,
  type ResultFrame,
} from '../../../src/exec/frames.js';

const result: ResultFrame = { id: '3', type: 'result', status: 'ok', stdout: 'a', stderr: '', stdoutBytes: 1, stderrBytes: 0, truncated: false, durationMs: 2 };

describe('parseKernelFrame', () => {
  it.each([
    ['a pong', { id: '1', type: 'pong', language: 'python', busy: false, pid: 7 }],
    ['an output frame', { id: '2', type: 'output', stream: 'stderr', text: 'x' }],
    ['a minimal result', result],
    [
      'a full result',
      { ...result, status: 'error', result: '42', exitCode: 137, error: { ename: 'E', evalue: 'v', traceback: 't' }, timedOut: false, oomKilled: true },
    ],
    ['a result with nulls for absent fields', { ...result, result: null, exitCode: null, error: null }],
    ['a busy result', { ...result, status: 'error', busy: true, error: { ename: 'KernelBusy', evalue: 'v', traceback: '' } }],
    ['a refusal for the network', { ...result, status: 'error', notIsolated: true, error: { ename: 'NetworkNotIsolated', evalue: 'v', traceback: '' } }],
    ['a recall of a run the kernel never ran', { ...result, status: 'error', notFound: true, error: { ename: 'NotFound', evalue: 'v', traceback: '' } }],
    ['a kernel error frame', { type: 'error', message: 'malformed frame header' }],
  ])('accepts %s', (_name, frame) => {
    expect(parseKernelFrame(frame).ok).toBe(true);
  });

  it.each([
    ['null', null],
    ['a number', 4],
    ['a string', 'result'],
    ['an array', [result]],
    ['no type', { id: '1' }],
    ['an unknown type', { id: '1', type: 'shell' }],
    ['a numeric id', { id: 1, type: 'pong' }],
    ['an empty id', { id: '', type: 'pong' }],
    ['a huge id', { id: 'i'.repeat(65), type: 'pong' }],
    ['an output frame for another stream', { id: '2', type: 'output', stream: 'stdin', text: 'x' }],
    ['output text that is not a string', { id: '2', type: 'output', stream: 'stdout', text: { toString: 1 } }],
    ['a negative byte count', { ...result, stdoutBytes: -1 }],
    ['a fractional byte count', { ...result, stdoutBytes: 1.5 }],
    ['an unsafe byte count', { ...result, stderrBytes: 2 ** 60 }],
    ['an unknown status', { ...result, status: 'fine' }],
    ['a negative duration', { ...result, durationMs: -3 }],
    ['truncated as a string', { ...result, truncated: 'no' }],
    ['busy as a string', { ...result, busy: 'yes' }],
    ['notIsolated as a number', { ...result, notIsolated: 1 }],
    ['notFound as a string', { ...result, notFound: 'yes' }],
    ['an exit code out of range', { ...result, exitCode: 2 ** 40 }],
    ['an error without a traceback', { ...result, error: { ename: 'E', evalue: 'v' } }],
    ['stdout missing', { id: '3', type: 'result', status: 'ok', stderr: '', stdoutBytes: 0, stderrBytes: 0, truncated: false, durationMs: 1 }],
  ])('rejects %s', (_name, frame) => {
    const r = parseKernelFrame(frame);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.why).toMatch(/^not a kernel frame/);
  });
});

describe('capText', () => {
  it.each([
    ['short text', 'abc', 5, 'abc', false],
    ['exactly the cap', 'abcde', 5, 'abcde', false],
    ['longer text', 'abcdef', 5, 'abcde', true],
    ['a zero cap', 'abc', 0, '', true],
    ['astral characters count once', '🎉🎉🎉', 2, '🎉🎉', true],
    ['astral characters within the cap', '🎉🎉', 2, '🎉🎉', false],
    ['a lone high surrogate at the cut', 'ab\ud83dcd', 3, 'ab\ud83d', true],
  ])('%s', (_name, s, cap, text, cut) => {
    expect(capText(s, cap)).toMatchObject({ text, cut });
  });
});

describe('sanitizeResult', () => {
  const big = 'x'.repeat(100);
  it.each([
    ['keeps an honest result', result, { stdout: 'a', truncated: false, stdoutBytes: 1 }],
    ['cuts stdout and says so', { ...result, stdout: big }, { stdout: 'x'.repeat(10), truncated: true, stdoutBytes: 10 }],
    ['cuts stderr and the result', { ...result, stderr: big, result: big }, { stderr: 'x'.repeat(10), result: 'x'.repeat(10), truncated: true }],
    ['raises byte counts below the kept text', { ...result, stdout: 'éé', stdoutBytes: 0 }, { stdoutBytes: 4 }],
    ['keeps a larger byte count', { ...result, stdoutBytes: 5_000 }, { stdoutBytes: 5_000 }],
    ["keeps the kernel's truncated flag", { ...result, truncated: true }, { truncated: true }],
    ['drops nulls', { ...result, result: null, exitCode: null }, { result: undefined, exitCode: undefined }],
    ['rounds the duration', { ...result, durationMs: 2.7 }, { durationMs: 3 }],
    ['keeps busy on an error result', { ...result, status: 'error', busy: true, error: { ename: 'KernelBusy', evalue: '', traceback: '' } }, { busy: true }],
    ['drops busy on a result that is not an error', { ...result, busy: true }, { busy: undefined }],
    ['drops busy: false', { ...result, status: 'error', busy: false }, { busy: undefined }],
    ['keeps notIsolated on an error result', { ...result, status: 'error', notIsolated: true }, { notIsolated: true }],
    ['drops notIsolated on a result that is not an error', { ...result, notIsolated: true }, { notIsolated: undefined }],
    ['keeps notFound on an error result', { ...result, status: 'error', notFound: true }, { notFound: true }],
    ['drops notFound on a result that is not an error', { ...result, notFound: true }, { notFound: undefined }],
  ])('%s', (_name, frame, expected) => {
    const out = sanitizeResult(frame as ResultFrame, 10);
    for (const [k, v] of Object.entries(expected)) expect(out[k as keyof typeof out]).toEqual(v);
  });

  it('cuts the exception texts without calling the output truncated', () => {
    const out = sanitizeResult({ ...result, status: 'error', error: { ename: 'E'.repeat(1000), evalue: big, traceback: big } }, 10);
    expect(out.error).toEqual({ ename: 'E'.repeat(MAX_ENAME_CHARS), evalue: 'x'.repeat(10), traceback: 'x'.repeat(10) });
    expect(out.truncated).toBe(false);
  });
});

it('sanitizeResult holds the kept part of a cut text, not the whole text of its frame', () => {
  // A cut of a long string is a view that keeps it all alive (V8): 20 kept results whose 3 MB
  // outputs were cut to 50,000 characters held ~60 MB before the copy.
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  gc();
  const before = process.memoryUsage().heapUsed;
  const kept = [];
  for (let i = 0; i < 20; i++) {
    const frame = JSON.parse(JSON.stringify({ ...result, stdout: `${i}${'y'.repeat(3_000_000)}` })) as ResultFrame;
    kept.push(sanitizeResult(frame, 50_000));
  }
  gc();
  const grown = process.memoryUsage().heapUsed - before;
  expect(kept.map((r) => [r.stdout.length, r.truncated])).toEqual(Array.from({ length: 20 }, () => [50_000, true]));
  expect(grown).toBeLessThan(30_000_000);
});

describe('maxFrameBytes', () => {
  it.each([1, 1000, 50_000, 262_144])('fits the largest legitimate result for a cap of %i', (cap) => {
    // Worst case: five texts of `cap` astral characters, as the Python kernel's ASCII fallback writes them.
    const astral = '\ud83c\udf89'.repeat(cap);
    const body = JSON.stringify({
      ...result,
      stdout: astral,
      stderr: astral,
      result: astral,
      error: { ename: 'E'.repeat(MAX_ENAME_CHARS), evalue: astral, traceback: astral },
      stdoutBytes: 2 ** 52,
      stderrBytes: 2 ** 52,
      exitCode: -(2 ** 31),
      durationMs: 2 ** 52,
    });
    const asciiEscaped = body.replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
    expect(asciiEscaped.length).toBeLessThan(maxFrameBytes(cap));
  });
});

describe('passedNetcheck', () => {
  it.each([
    [{}, true],
    [{ busy: true as const }, false],
    [{ notIsolated: true as const }, false],
  ])('%j → %s', (answer, want) => {
    expect(passedNetcheck(answer)).toBe(want);
  });
});

describe('maxOutputFrameBytes', () => {
  it.each(['x', '\u0001', 'é', '\u{1F600}', '"', '\\'])('covers a text of %j at the worst JSON escape (Python: ASCII only)', (ch) => {
    const text = ch.repeat(1000);
    const python = `{"id": "12345", "type": "output", "stream": "stderr", "text": ${JSON.stringify(text).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)}}`;
    expect(Buffer.byteLength(`${python.length}\n${python}`)).toBeLessThanOrEqual(maxOutputFrameBytes(text.length));
  });
});
