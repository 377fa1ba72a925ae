// checkArgs on arguments shaped by hostile code: any number of keys, keys and values of any
// length. The problems stay few and short, and the work stops with them (results.test.ts has the
// ordinary cases).
import { describe, expect, it } from 'vitest';
import { checkArgs } from '../../../src/codemode/args.js';

const strict = { type: 'object', properties: { q: { type: 'string' } }, additionalProperties: false };
const withEnum = { type: 'object', properties: { state: { enum: ['open', 'closed', 1, { a: 1 }] } } };

/** Arguments whose keys count how often they are read, to show the walk stops. */
function countingArgs(n: number): { args: Record<string, unknown>; reads: () => number } {
  let reads = 0;
  const args: Record<string, unknown> = {};
  for (let i = 0; i < n; i++)
    Object.defineProperty(args, `k${i}`, {
      enumerable: true,
      get: () => {
        reads++;
        return i;
      },
    });
  return { args, reads: () => reads };
}

describe('checkArgs on hostile arguments', () => {
  it('stops at five problems, however many unknown keys', () => {
    const { args, reads } = countingArgs(100_000);
    expect(checkArgs(strict, args)).toHaveLength(5);
    expect(reads()).toBeLessThanOrEqual(5);
  });

  it('quotes at most 64 characters of a key', () => {
    const [problem] = checkArgs(strict, { ['k'.repeat(1_000_000)]: 1 });
    expect(problem).toBe(`unknown argument "${'k'.repeat(64)}…" (expected: q)`);
  });

  it.each<[string, unknown, boolean]>([
    ['a value of the enum', 'open', true],
    ['a number of the enum', 1, true],
    ['an object of the enum', { a: 1 }, true],
    ['another short value', 'merged', false],
    ['a string longer than every value (never serialised)', 'o'.repeat(1_000_000), false],
    ['an array longer than every value', Array.from({ length: 100_000 }, () => 'open'), false],
  ])('%s: fits the enum = %s', (_what, state, fits) => {
    expect(checkArgs(withEnum, { state })).toEqual(fits ? [] : [expect.stringMatching(/^argument "state" must be one of /)]);
  });
});
