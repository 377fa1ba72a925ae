// The argument checks exist three times: in the gateway (src/codemode/args.ts) and in the sandbox
// modules (runtime/sdk, python and node), so a mistake fails before it leaves the sandbox. They
// must agree: each case runs through all three.
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkArgs } from '../../../src/codemode/args.js';
import { RUNTIME_DIR } from '../runtime/harness.js';

const schema = {
  type: 'object',
  properties: {
    title: { type: 'string' },
    n: { type: 'integer' },
    x: { type: 'number' },
    state: { enum: ['open', 'closed'] },
    tags: { type: ['array', 'null'] },
    o: { type: 'object' },
  },
  required: ['title'],
  additionalProperties: false,
};
const open = { type: 'object', properties: { a: { type: 'boolean' } } };

const CASES: Array<[string, Record<string, unknown>, Record<string, unknown>]> = [
  ['fine', schema, { title: 't', n: 1, x: 1.5, state: 'open', tags: [], o: {} }],
  ['missing required', schema, {}],
  ['string for integer', schema, { title: 't', n: '1' }],
  ['float for integer', schema, { title: 't', n: 1.5 }],
  ['integer for number', schema, { title: 't', x: 2 }],
  ['bool for integer', schema, { title: 't', n: true }],
  ['not in enum', schema, { title: 't', state: 'merged' }],
  ['true is not 1 in an enum', { properties: { v: { enum: [1, 2] } } }, { v: true }],
  ['union type', schema, { title: 't', tags: 'a' }],
  ['null in union', schema, { title: 't', tags: null }],
  ['list for object', schema, { title: 't', o: [] }],
  ['unknown key, forbidden', schema, { title: 't', zzz: 1 }],
  ['unknown key, allowed', open, { zzz: 1, a: false }],
  ['no schema properties', {}, { anything: 1 }],
  // An upstream's schema is any JSON: what is not a schema is skipped by all three, never thrown on.
  ['a property schema that is null', { properties: { a: null, b: { type: 'string' } } }, { a: 1, b: 2 }],
  ['required names that are not strings', { properties: {}, required: [null, 1, { a: 1 }, 'z'] }, {}],
  [
    'unknown key, many expected',
    { properties: Object.fromEntries(Array.from({ length: 25 }, (_, i) => [`p${i}`, {}])), additionalProperties: false },
    { zzz: 1 },
  ],
];

function python(cases: typeof CASES): string[][] {
  const code = 'import json, sys\nfrom codemode import check_args\nprint(json.dumps([check_args(s, a) for s, a in json.load(sys.stdin)]))';
  const out = execFileSync('python3', ['-c', code], {
    input: JSON.stringify(cases.map(([, s, a]) => [s, a])),
    env: { ...process.env, PYTHONPATH: join(RUNTIME_DIR, 'sdk/python'), PYTHONDONTWRITEBYTECODE: '1' },
  });
  return JSON.parse(out.toString()) as string[][];
}

const node = createRequire(import.meta.url)(join(RUNTIME_DIR, 'sdk/node/codemode.js')) as { checkArgs: typeof checkArgs };

describe('argument checks agree: gateway, python module, node module', () => {
  const fromPython = python(CASES);
  it.each(CASES.map((c, i) => [c[0], c, i] as const))('%s', (_name, [, s, a], i) => {
    const expected = checkArgs(s, a);
    expect(fromPython[i]).toEqual(expected);
    expect(node.checkArgs(s, a)).toEqual(expected);
  });

  it('finds a problem where one is expected (the table is not all fine)', () => {
    expect(CASES.filter(([, s, a]) => checkArgs(s, a).length > 0).length).toBeGreaterThanOrEqual(8);
  });
});
