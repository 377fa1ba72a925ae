import { describe, expect, it } from 'vitest';
import { exitCodeFromStatus, shortenExecError } from '../../../src/exec/exec.js';
import { RUNNER_SCRIPT, newNonce, parseTrailer, runnerCommand, stripTrailer } from '../../../src/exec/runner.js';

const nonce = 'cm0123456789abcdef';

describe('runnerCommand', () => {
  it('passes only fixed words and numbers on the command line, never the code', () => {
    const cmd = runnerCommand('python', 30, 1234, nonce);
    expect(cmd).toEqual(['/bin/sh', '-c', RUNNER_SCRIPT, 'codemode-runner', 'python', '30', '1234', nonce, '0']);
    expect(runnerCommand('sh', 5, 1, nonce, 99).at(-1)).toBe('99');
  });

  it('makes a new nonce every time', () => {
    expect(newNonce()).not.toBe(newNonce());
    expect(newNonce()).toMatch(/^cm[0-9a-f]{16}$/);
  });
});

describe('parseTrailer', () => {
  const t = (exitCode: number, timedOut: boolean, oomKilled: boolean, processLimit: boolean, diskFull?: 'workspace' | 'tmp', leftovers = 0) => ({
    exitCode,
    timedOut,
    oomKilled,
    processLimit,
    diskFull,
    leftovers,
  });
  it.each([
    [`out\x1e${nonce} 0 0 0 0 - 0\n`, t(0, false, false, false)],
    [`\x1e${nonce} 3 0 0 0 - 0\n`, t(3, false, false, false)],
    [`x\x1e${nonce} 124 1 0 0 - 0\n`, t(124, true, false, false)],
    [`\x1e${nonce} 137 0 1 0 - 0\n`, t(137, false, true, false)],
    [`\x1e${nonce} 124 1 0 37 - 0\n`, t(124, true, false, true)],
    [`\x1e${nonce} 1 0 0 0 tmp 0\n`, t(1, false, false, false, 'tmp')],
    [`\x1e${nonce} 137 0 0 0 workspace 0\n`, t(137, false, false, false, 'workspace')],
    [`\x1e${nonce} 0 0 0 110 - 57\n`, t(0, false, false, true, undefined, 57)],
  ])('reads %j', (tail, expected) => {
    const { bytes: _bytes, ...got } = parseTrailer(Buffer.from(tail, 'latin1'), nonce) ?? { bytes: 0 };
    expect({ diskFull: undefined, ...got }).toEqual(expected);
  });

  it.each([
    ['no trailer', 'just stderr\n'],
    ['another nonce (a careless program)', `\x1ecmffffffffffffffff 0 0 0\n`],
    // The program can read the nonce: a trailer it forges is held to what the runner can print.
    ['an exit status past 255', `\x1e${nonce} 256 0 0 0 - 0\n`],
    ['an exit status of 20 digits (the API server refuses it: the run would never be recorded)', `\x1e${nonce} 99999999999999999999 0 0 0 - 0\n`],
    ['a negative exit status', `\x1e${nonce} -1 0 0 0 - 0\n`],
    ['a counter of 10 digits', `\x1e${nonce} 0 0 1234567890 0 - 0\n`],
    ['leftovers of 10 digits', `\x1e${nonce} 0 0 0 0 - 1234567890\n`],
    ['text after the trailer', `\x1e${nonce} 0 0 0\nmore`],
    ['cut trailer', `\x1e${nonce} 0 0 0 0`],
    ['old four-field trailer', `\x1e${nonce} 0 0 0\n`],
    ['six-field trailer', `\x1e${nonce} 0 0 0 0 -\n`],
    ['unknown volume', `\x1e${nonce} 1 0 0 0 root 0\n`],
  ])('ignores %s', (_what, tail) => {
    expect(parseTrailer(Buffer.from(tail, 'latin1'), nonce)).toBeUndefined();
  });

  it('reports the trailer size so it can be taken off the byte count', () => {
    expect(parseTrailer(Buffer.from(`err\n\x1e${nonce} 1 0 0 0 - 0\n`), nonce)?.bytes).toBe(`\x1e${nonce} 1 0 0 0 - 0\n`.length);
  });
});

describe('stripTrailer', () => {
  it.each([
    [`boom\n\x1e${nonce} 1 0 0\n`, 'boom\n'],
    [`boom\n\x1e${nonce.slice(0, 5)}`, 'boom\n'],
    ['plain\n', 'plain\n'],
    ['user \x1e record separator', 'user \x1e record separator'],
  ])('%j → %j', (input, output) => {
    expect(stripTrailer(input, nonce)).toBe(output);
  });
});

describe('exitCodeFromStatus', () => {
  it.each([
    [{ status: 'Success' }, { exitCode: 0 }],
    [{ status: 'Failure', reason: 'NonZeroExitCode', details: { causes: [{ reason: 'ExitCode', message: '42' }] } }, { exitCode: 42 }],
    [{ status: 'Failure', reason: 'InternalError', message: 'container not found' }, { error: 'container not found' }],
  ])('%j', (status, expected) => {
    expect(exitCodeFromStatus(status)).toEqual(expected);
  });
});

describe('shortenExecError', () => {
  it('drops the exec URL (it quotes the whole runner script)', () => {
    const msg = `error sending request: Post "https://node:10250/exec/ns/pod/c?command=${'x'.repeat(2000)}": dial tcp: no such host`;
    expect(shortenExecError(msg)).toBe('error sending request: Post "<kubelet exec URL>": dial tcp: no such host');
  });
});
