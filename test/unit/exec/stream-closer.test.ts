import { describe, expect, it } from 'vitest';
import { StreamCloser, type ClosableSocket } from '../../../src/exec/exec.js';

function socket(readyState: number, withTerminate = true): ClosableSocket & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    readyState,
    close: () => calls.push('close'),
    ...(withTerminate && { terminate: () => calls.push('terminate') }),
  };
}

describe('StreamCloser', () => {
  it.each<[string, (c: StreamCloser, s: ClosableSocket) => void, number, boolean, string[]]>([
    [
      'closed after the socket opened (watchdog on a live stream)',
      (c, s) => {
        c.attach(s);
        c.close();
      },
      1,
      true,
      ['terminate'],
    ],
    [
      'closed before the socket opened (watchdog before the upgrade)',
      (c, s) => {
        c.close();
        c.attach(s);
      },
      1,
      true,
      ['terminate'],
    ],
    ['never closed while in use', (c, s) => c.attach(s), 1, true, []],
    [
      'a socket already closed is left alone',
      (c, s) => {
        c.attach(s);
        c.close();
      },
      3,
      true,
      [],
    ],
    [
      'a socket without terminate() is closed politely',
      (c, s) => {
        c.attach(s);
        c.close();
      },
      1,
      false,
      ['close'],
    ],
    [
      'closing twice terminates at most twice and never throws',
      (c, s) => {
        c.attach(s);
        c.close();
        c.close();
      },
      1,
      true,
      ['terminate', 'terminate'],
    ],
  ])('%s', (_name, act, readyState, withTerminate, expected) => {
    const s = socket(readyState, withTerminate);
    act(new StreamCloser(), s);
    expect(s.calls).toEqual(expected);
  });

  it('swallows an error from a socket that is already going away', () => {
    const c = new StreamCloser();
    c.attach({
      readyState: 2,
      close: () => {
        throw new Error('closing');
      },
    });
    expect(() => c.close()).not.toThrow();
  });
});
