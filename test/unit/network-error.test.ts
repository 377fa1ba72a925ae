import { describe, expect, it } from 'vitest';
import { isApiUnavailable, isNetworkError } from '../../src/util/network-error.js';

const sysErr = (code: string): Error => Object.assign(new Error(`connect ${code} 127.0.0.1:6443`), { code });

describe('isNetworkError: no answer from the API server, as opposed to an answer', () => {
  it.each([
    ['a socket error with a code', sysErr('ECONNRESET'), true],
    ['refused', sysErr('ECONNREFUSED'), true],
    ["the websocket's ErrorEvent carrying it", { type: 'error', message: 'read ECONNRESET', error: sysErr('ECONNRESET') }, true],
    ['a TLS handshake cut short', new Error('Client network socket disconnected before secure TLS connection was established'), true],
    ['a stream error quoting the socket error', new Error('exec stream error: read ECONNRESET'), true],
    ['the API server answered 404', new Error('Unexpected server response: 404'), false],
    ["fetch's TypeError with the socket error as its cause", new TypeError('fetch failed', { cause: sysErr('ECONNREFUSED') }), true],
    ['wrapped by us, cause kept', new Error('Failed to create SandboxRun', { cause: new TypeError('fetch failed', { cause: sysErr('ECONNRESET') }) }), true],
    [
      "fetch's TypeError: the connection closed before the answer (undici's SocketError, from a proxy in between)",
      new TypeError('fetch failed', { cause: Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' }) }),
      true,
    ],
    ['undici: no headers in time', Object.assign(new Error('Headers Timeout Error'), { code: 'UND_ERR_HEADERS_TIMEOUT' }), true],
    ['undici: a request it refused to send (not a network failure)', Object.assign(new Error('invalid header'), { code: 'UND_ERR_INVALID_ARG' }), false],
    ['the relay exited', new Error('the kernel relay exited (exit code 1)'), false],
    ['not an error', undefined, false],
  ])('%s', (_what, err, expected) => {
    expect(isNetworkError(err)).toBe(expected);
  });
});

describe('isApiUnavailable: unreachable, or answering that it cannot serve now', () => {
  const apiErr = (code: number): Error => Object.assign(new Error(`HTTP-Code: ${code}`), { code });
  it.each([
    ['a socket error', sysErr('ECONNREFUSED'), true],
    ['503 while the API server starts', apiErr(503), true],
    ['429 under load', apiErr(429), true],
    ['500 wrapped by us', new Error('Failed to create SandboxRun', { cause: apiErr(500) }), true],
    ['404', apiErr(404), false],
    ['409 conflict', apiErr(409), false],
    ['422 invalid', apiErr(422), false],
  ])('%s', (_what, err, expected) => {
    expect(isApiUnavailable(err)).toBe(expected);
  });
});
