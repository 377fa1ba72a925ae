import { SdkErrorCode, SdkHttpError } from '@modelcontextprotocol/client';
import { describe, expect, it } from 'vitest';
import { classify, redact } from '../../../src/upstreams/connection.js';

describe('redact', () => {
  it.each([
    ['removes every occurrence', 'bad key s3cr3t-value (s3cr3t-value)', ['s3cr3t-value'], 'bad key [redacted] ([redacted])'],
    ['leaves text without secrets', 'fetch failed', ['s3cr3t-value'], 'fetch failed'],
    ['ignores values too short to be secrets', 'a b c', ['a'], 'a b c'],
    ['removes a bearer token quoted without its scheme', 'invalid token: s3cr3t-value', ['Bearer s3cr3t-value'], 'invalid token: [redacted]'],
    ['removes a bearer token quoted with it', 'got "Bearer s3cr3t-value"', ['Bearer s3cr3t-value'], 'got "[redacted]"'],
    ['removes credentials after any scheme', 'user dXNlcjpwYXNz unknown', ['Basic dXNlcjpwYXNz'], 'user [redacted] unknown'],
  ])('%s', (_name, text, secrets, expected) => {
    expect(redact(text, secrets)).toBe(expected);
  });

  it('bounds the length', () => {
    expect(redact('x'.repeat(5000), []).length).toBe(1024);
  });
});

describe('classify', () => {
  it.each<[string, unknown, string, RegExp]>([
    ['401', new SdkHttpError(SdkErrorCode.ClientHttpAuthentication, 'Unauthorized', { status: 401 }), 'Unauthorized', /HTTP 401/],
    ['403', new SdkHttpError(SdkErrorCode.ClientHttpForbidden, 'Forbidden', { status: 403 }), 'Unauthorized', /HTTP 403/],
    ['connection refused', new Error('fetch failed', { cause: { code: 'ECONNREFUSED' } }), 'Unreachable', /^fetch failed: ECONNREFUSED$/],
    [
      '502',
      new SdkHttpError(SdkErrorCode.ClientHttpNotImplemented, 'Bad Gateway', { status: 502, text: '' }),
      'Unreachable',
      /Bad Gateway \(HTTP 502, empty body\)$/,
    ],
    [
      'a failed GET (no body read) is not said to have an empty body',
      new SdkHttpError(SdkErrorCode.ClientHttpFailedToOpenStream, 'Failed to open SSE stream: Not Found', { status: 404, statusText: 'Not Found' }),
      'Unreachable',
      /^Failed to open SSE stream: Not Found \(HTTP 404 Not Found\)$/,
    ],
    [
      'a POST answered with an empty body names the status',
      new SdkHttpError(SdkErrorCode.ClientHttpNotImplemented, 'Error POSTing to endpoint: ', { status: 404, statusText: 'Not Found', text: '' }),
      'Unreachable',
      /^Error POSTing to endpoint: {2}\(HTTP 404 Not Found, empty body\)$/,
    ],
    [
      'a body is not called empty',
      new SdkHttpError(SdkErrorCode.ClientHttpNotImplemented, 'Error POSTing to endpoint: nope', { status: 400, text: 'nope' }),
      'Unreachable',
      /nope \(HTTP 400\)$/,
    ],
    [
      'a status the message already names is not repeated',
      new SdkHttpError(SdkErrorCode.ClientHttpNotImplemented, 'Error POSTing to endpoint (HTTP 500): x', { status: 500, text: 'x' }),
      'Unreachable',
      /^Error POSTing to endpoint \(HTTP 500\): x$/,
    ],
  ])('%s', (_name, err, reason, message) => {
    const c = classify(err);
    expect(c.reason).toBe(reason);
    expect(c.message).toMatch(message);
  });
});
