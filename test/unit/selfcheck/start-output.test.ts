import { describe, expect, it } from 'vitest';
import { startLineFor } from '../../../scripts/start-output.js';

describe('startLineFor (npm start)', () => {
  it.each<[string, string | undefined]>([
    ['{"level":30,"event":"sandbox-check","summary":"Sandbox check passed: x.","msg":"Sandbox check passed"}', '[start] Sandbox check passed: x.'],
    ['{"level":40,"event":"sandbox-check","summary":"WARNING: y","msg":"Accepted"}', '[start] WARNING: y'],
    ['{"level":30,"msg":"Serving MCP at /mcp"}', undefined],
    ['{"level":30,"event":"sandbox-check"}', undefined],
    ['not json but mentions "sandbox-check"', undefined],
    ['', undefined],
  ])('%s', (line, expected) => {
    expect(startLineFor(line)).toBe(expected);
  });
});
