// What a call that gave up waiting for a busy session is told: why it did not run, and what to do.
import { describe, expect, it } from 'vitest';
import { SessionBusyError, WAITING_CALLS_PER_SESSION, busyError, goneError } from '../../../src/sessions/errors.js';

describe('busyError', () => {
  it.each<[string, Parameters<typeof busyError>[1], boolean, RegExp, RegExp]>([
    [
      'a call running all along',
      'deadline',
      false,
      /^Session s was running another call for all of the 15 s this call could wait; this call did not run\.$/,
      /timeout_seconds bounds it/,
    ],
    // A Node kernel that never answered: no call need be running; what holds it is stopped, with the session, past the longest call.
    [
      'a Node kernel that never answered',
      'deadline',
      true,
      /^Session s did not answer for all of the 15 s this call could wait: .*code an earlier call left running \(a timer, a callback, a promise\); this call did not run\.$/,
      /the interpreter is stopped, and the session is lost.*Close the session \(close_session\)/,
    ],
    [
      'too many waiting',
      'full',
      false,
      new RegExp(`and ${WAITING_CALLS_PER_SESSION} more are waiting for it; this call did not run\\.$`),
      /timeout_seconds bounds it/,
    ],
    ['too many waiting, silent', 'full', true, new RegExp(`and ${WAITING_CALLS_PER_SESSION} more are waiting for it`), /timeout_seconds bounds it/],
    ['the caller went away', 'aborted', true, /^The call was cancelled while it waited for session s/, /^Call again if you still need it\.$/],
  ])('%s', (_n, why, silent, message, hint) => {
    const err = busyError('s', why, 15, silent);
    expect(err).toBeInstanceOf(SessionBusyError);
    expect(err.message).toMatch(message);
    expect(err.hint).toMatch(hint);
  });
});

describe('goneError', () => {
  it.each<[string, Parameters<typeof goneError>[1], string, string | undefined]>([
    [
      'a Lost session whose message is a sentence',
      { phase: 'Lost', reason: 'PodDeleted', message: 'The sandbox pod is being deleted.' },
      'Session s is lost: The sandbox pod is being deleted.',
      undefined,
    ],
    ['a message without its full stop', { phase: 'Lost', message: 'gone' }, 'Session s is lost: gone.', undefined],
    ['no message', { phase: 'Lost' }, 'Session s is lost: its interpreter is gone.', undefined],
    [
      'a session that failed to start passes its reason on',
      { phase: 'Failed', reason: 'Unschedulable', message: 'The pod did not start in time.' },
      'Session s is failed: The pod did not start in time.',
      'Unschedulable',
    ],
    [
      'an interpreter lost before the phase says so',
      { phase: 'Failed', reason: 'Unschedulable', kernelLost: { message: 'it exited', time: '2026-12-07T00:00:00Z' } },
      'Session s is failed: the interpreter is gone (it exited).',
      undefined,
    ],
  ])('%s', (_what, status, message, reason) => {
    const err = goneError('s', status);
    expect(err.message).toBe(message);
    expect(err.hint).toBe('Create a new session with create_session.');
    expect(err.reason).toBe(reason);
  });
});
