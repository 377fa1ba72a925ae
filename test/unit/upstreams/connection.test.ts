import { SdkErrorCode, SdkHttpError } from '@modelcontextprotocol/client';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { UpstreamConnection, classify, redact, urlSecrets } from '../../../src/upstreams/connection.js';
import { until } from './hostile-upstream.js';

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

describe('urlSecrets', () => {
  it.each<[string, string, string[]]>([
    ['none in a plain URL', 'http://github-mcp.tools.svc:8080/mcp', []],
    ['user and password', 'https://bot:p%40ss@mcp.example.com/mcp', ['bot', 'p%40ss', 'p@ss']],
    ['a token as the user name', 'https://ghp_token123@mcp.example.com/mcp', ['ghp_token123']],
    ['query values, written and decoded', 'https://mcp.example.com/mcp?api_key=k%2Fey&flag&x=a+b', ['k%2Fey', 'k/ey', 'a+b', 'a b']],
    ['nothing from a URL that does not parse', 'not a url', []],
  ])('%s', (_name, url, expected) => {
    expect(urlSecrets(url).sort()).toEqual(expected.sort());
  });

  it('keeps the credentials of an upstream URL out of the log, the status and a call’s error', async () => {
    const lines: string[] = [];
    const conn = new UpstreamConnection(
      'creds',
      // fetch refuses a URL with credentials, quoting it whole: nothing needs to listen there.
      { url: 'http://bot:s3cretpw@127.0.0.1:9/mcp?api_key=QUERYKEY', headers: {} },
      {
        healthIntervalMs: 60_000,
        requestTimeoutMs: 5_000,
        messageMaxBytes: 16 << 20,
        onState: () => undefined,
        log: pino({ level: 'debug' }, { write: (l: string) => void lines.push(l) }),
      },
    );
    try {
      conn.start();
      await until(() => conn.state.error !== undefined);
      const called = await conn.call('echo', {}, 1000).then(
        () => '',
        (err: unknown) => String(err),
      );
      const seen = [lines.join(''), conn.state.error ?? '', called];
      expect(seen[0]).toContain('Upstream MCP server not reachable');
      expect(seen[1]).toContain('127.0.0.1:9/mcp');
      for (const text of seen) for (const secret of ['s3cretpw', 'QUERYKEY']) expect(text).not.toContain(secret);
    } finally {
      await conn.stop();
    }
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
