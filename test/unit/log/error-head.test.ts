import { describe, expect, it } from 'vitest';
import { ERROR_HEAD_MAX_CHARS, errorHead } from '../../../src/log/error-head.js';

describe('errorHead (what a log line may say of an error that can quote its input)', () => {
  it.each<[string, unknown, string]>([
    [
      'an MCP rejection quoting a header and the body',
      new Error('Rejected inbound request (name-header-mismatch): Bad Request: the body carries params.name="secret" but the Mcp-Name header names "code"'),
      'Error: Rejected inbound request (name-header-mismatch)',
    ],
    ['a JSON parser quoting its input', new SyntaxError('Unexpected token \'p\', "print(open"... is not valid JSON'), 'SyntaxError: Unexpected token'],
    ['a message of its own', new Error('Session not found'), 'Error: Session not found'],
    ['a message on several lines', new Error('first line\nsecret = 1'), 'Error: first line'],
    ['a message that starts quoting', new Error('"secret"'), 'Error'],
    ['an error class that is not a word', Object.assign(new Error('x'), { name: 'secret code()' }), 'Error: x'],
    ['a thrown string', 'secret', 'string'],
    ['a long message is cut', new Error('x'.repeat(10_000)), `Error: ${'x'.repeat(ERROR_HEAD_MAX_CHARS)}`],
  ])('%s', (_name, err, expected) => {
    expect(errorHead(err)).toBe(expected);
  });
});
