import { SdkErrorCode, SdkHttpError } from '@modelcontextprotocol/client';
import { describe, expect, it } from 'vitest';
import { classify, redact } from '../../../src/upstreams/connection.js';

describe('redact', () => {
  it.each([
    ['removes every occurrence', 'bad key s3cr3t-value (s3cr3t-value)', ['s3cr3t-value'], 'bad key [redacted] ([redacted])'],
    ['leaves text without secrets', 'fetch failed', ['s3cr3t-value'], 'fetch failed'],
    ['ignores values too short to be secrets', 'a b c', ['a'], 'a b c'],
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
    ['502', new SdkHttpError(SdkErrorCode.ClientHttpNotImplemented, 'Bad Gateway', { status: 502 }), 'Unreachable', /Bad Gateway/],
  ])('%s', (_name, err, reason, message) => {
    const c = classify(err);
    expect(c.reason).toBe(reason);
    expect(c.message).toMatch(message);
  });
});
