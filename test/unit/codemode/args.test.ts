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

// The schema is an upstream's: any number of parameters, and a refused call counts against no
// run's limit (only the stream's ~1,000 a second), so each one's work stays small.
describe('checkArgs against a hostile schema', () => {
  const names = (n: number, prefix = 'p'): string[] => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

  it('reads no further than five missing required arguments', () => {
    let reads = 0;
    const required = new Proxy(names(100_000), { get: (target, key) => (typeof key === 'string' && /^\d+$/.test(key) && reads++, Reflect.get(target, key)) });
    expect(checkArgs({ type: 'object', required }, {})).toEqual(names(5).map((n) => `missing required argument "${n}"`));
    expect(reads).toBeLessThanOrEqual(6);
  });

  it.each<[string, number, string]>([
    ['all of a few', 3, 'p0, p1, p2'],
    [`the first ${20} of many`, 100_000, `${names(20).join(', ')}, …`],
  ])('lists %s expected names, listing the parameters once', (_name, n, listed) => {
    let listings = 0;
    const properties = new Proxy(Object.fromEntries(names(n).map((k) => [k, { type: 'string' }])), {
      ownKeys: (target) => (listings++, Reflect.ownKeys(target)),
    });
    const schema = { type: 'object', properties, additionalProperties: false };
    for (let i = 0; i < 3; i++)
      expect(checkArgs(schema, Object.fromEntries(names(5, 'x').map((k) => [k, 1])))).toEqual(
        names(5, 'x').map((k) => `unknown argument "${k}" (expected: ${listed})`),
      );
    expect(listings).toBe(1);
  });
  it.each<[string, unknown, boolean]>([
    ['a value of it', 'value7', true],
    ['another value', 'nope', false],
    ['a longer string', 'v'.repeat(100), false],
  ])('checks against an enum of 200,000 values, reading them once: %s', (_name, value, fits) => {
    let reads = 0;
    const values = new Proxy(names(200_000, 'value'), {
      get: (target, key) => (typeof key === 'string' && /^\d+$/.test(key) && reads++, Reflect.get(target, key)),
    });
    const schema = { type: 'object', properties: { s: { enum: values } } };
    for (let i = 0; i < 3; i++)
      expect(checkArgs(schema, { s: value })).toEqual(fits ? [] : [expect.stringMatching(/^argument "s" must be one of \["value0","value1",/)]);
    expect(reads).toBeLessThanOrEqual(2 * 200_000);
  });
});
