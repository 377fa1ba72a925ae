import { describe, expect, it } from 'vitest';
import { isApiUnavailable, isNetworkError, isUpgradeUnavailable } from '../../src/util/network-error.js';

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
    ['Node refusing a call (a bug, not the network)', Object.assign(new TypeError('The "chunk" argument must be …'), { code: 'ERR_INVALID_ARG_TYPE' }), false],
    [
      'a certificate that does not name the host',
      Object.assign(new Error("Hostname/IP does not match certificate's altnames"), { code: 'ERR_TLS_CERT_ALTNAME_INVALID' }),
      false,
    ],
    ['a socket closed under a write', Object.assign(new Error('Socket is closed'), { code: 'ERR_SOCKET_CLOSED' }), true],
    ['a stream closed before it ended', Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' }), true],
    ['an HTTP/2 session the server went away from', Object.assign(new Error('New streams cannot be created'), { code: 'ERR_HTTP2_GOAWAY_SESSION' }), true],
    ['a name lookup to retry', sysErr('EAI_AGAIN'), true],
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

describe('isUpgradeUnavailable: an exec the API server could not serve now', () => {
  // client-node rejects a failed upgrade with ws's ErrorEvent, the Error in `.error`.
  const upgrade = (status: number): object => ({
    type: 'error',
    message: `Unexpected server response: ${status}`,
    error: new Error(`Unexpected server response: ${status}`),
  });
  it.each([
    ['500: the kubelet could not be dialed (a restart)', upgrade(500), true],
    ['502', upgrade(502), true],
    ['503 while the API server starts', upgrade(503), true],
    ['504', upgrade(504), true],
    ['429 under load', upgrade(429), true],
    ['404: the pod is not there', upgrade(404), false],
    ['400', upgrade(400), false],
    ['403', upgrade(403), false],
    ['501 is not a passing state', upgrade(501), false],
    ['a status that only starts like one', upgrade(5031), false],
    ['wrapped by us, cause kept', new Error('Cannot reach the session kernel', { cause: upgrade(503) }), true],
    ['a socket error (isNetworkError says so)', sysErr('ECONNRESET'), false],
    ['not an error', undefined, false],
  ])('%s', (_what, err, expected) => {
    expect(isUpgradeUnavailable(err)).toBe(expected);
  });
});
