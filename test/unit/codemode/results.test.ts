import { describe, expect, it } from 'vitest';
import { checkArgs, signature } from '../../../src/codemode/args.js';
import { cutToBytes, jsonBytes } from '../../../src/codemode/cut.js';
import { unwrapResult } from '../../../src/codemode/unwrap.js';

const text = (t: string) => ({ type: 'text', text: t });
const image = { type: 'image', data: 'iVBORw0KGgo=', mimeType: 'image/png' };

describe('unwrapResult', () => {
  it.each([
    ['structuredContent first', { content: [text('ignored')], structuredContent: { a: 1 } }, { ok: true, value: { a: 1 } }],
    ['JSON parsed from text', { content: [text('{"rows": [1, 2]}')] }, { ok: true, value: { rows: [1, 2] } }],
    ['a JSON number', { content: [text(' 42 ')] }, { ok: true, value: 42 }],
    ['plain text stays text', { content: [text('Echo: hi')] }, { ok: true, value: 'Echo: hi' }],
    ['text that only starts like JSON', { content: [text('[not json')] }, { ok: true, value: '[not json' }],
    ['an image is kept as an object', { content: [image] }, { ok: true, value: image }],
    ['several items become a list', { content: [text('1'), image] }, { ok: true, value: [1, image] }],
    ['no content is null', { content: [] }, { ok: true, value: null }],
    ['isError carries the upstream message', { content: [text('it broke'), text('badly')], isError: true }, { ok: false, message: 'it broke\nbadly' }],
    ['isError without text', { isError: true }, { ok: false, message: 'the tool failed without a message' }],
  ])('%s', (_name, result, expected) => {
    expect(unwrapResult(result)).toEqual(expected);
  });
});

const rows = Array.from({ length: 200 }, (_, i) => ({ id: i, name: `row number ${i}` }));

describe('cutToBytes', () => {
  it.each([
    ['a value under the limit is untouched', { a: [1, 2] }, 1000, { a: [1, 2] }],
    ['a long string keeps its prefix', 'x'.repeat(100), 20, `${'x'.repeat(15)}…`],
    ['an array keeps a prefix of whole items', [111, 222, 333, 444], 10, [111, 222]],
    ['small keys survive next to a huge list', { total: 200, next: 'cursor-2', rows }, 300, undefined],
    ['nested objects keep their keys', { a: { b: 'y'.repeat(500), c: 1 } }, 60, undefined],
  ])('%s', (_name, value, max, expected) => {
    const r = cutToBytes(value, max);
    if (expected !== undefined) expect(r.value).toEqual(expected);
    expect(jsonBytes(r.value)).toBeLessThanOrEqual(max);
    expect(r.cut === undefined).toBe(jsonBytes(value) <= max);
  });

  it('keeps the shape: same keys, same types, a shorter array', () => {
    const r = cutToBytes({ total: 200, next: 'cursor-2', rows }, 300);
    const v = r.value as { total: number; next: string; rows: unknown[] };
    expect(Object.keys(v)).toEqual(['total', 'next', 'rows']);
    expect(v.total).toBe(200);
    expect(v.next).toBe('cursor-2');
    expect(v.rows.length).toBeGreaterThan(0);
    expect(v.rows.length).toBeLessThan(200);
    expect(v.rows[0]).toEqual(rows[0]);
    expect(r.cut).toMatch(/^result cut from \d+ to \d+ bytes \(limit 300\): \d+ array items dropped/);
  });

  it('never splits a surrogate pair', () => {
    const r = cutToBytes('😀'.repeat(50), 30);
    expect(r.value).not.toMatch(/[\ud800-\udbff](?![\udc00-\udfff])/);
  });
});

const schema = {
  type: 'object',
  properties: {
    title: { type: 'string' },
    count: { type: 'integer' },
    ratio: { type: 'number' },
    state: { type: 'string', enum: ['open', 'closed'] },
    tags: { type: ['array', 'null'] },
  },
  required: ['title'],
  additionalProperties: false,
};

describe('checkArgs', () => {
  it.each([
    ['fine', { title: 'x', count: 2, ratio: 2, state: 'open', tags: null }, []],
    ['a missing required argument', {}, ['missing required argument "title"']],
    ['a wrong type', { title: 1 }, ['argument "title" must be string, not integer']],
    ['a float for an integer', { title: 'x', count: 1.5 }, ['argument "count" must be integer, not number']],
    ['a value outside the enum', { title: 'x', state: 'merged' }, ['argument "state" must be one of ["open","closed"]']],
    ['a union type', { title: 'x', tags: 'a' }, ['argument "tags" must be array or null, not string']],
    ['an unknown key when forbidden', { title: 'x', extra: 1 }, ['unknown argument "extra" (expected: title, count, ratio, state, tags)']],
  ])('%s', (_name, args, expected) => {
    expect(checkArgs(schema, args)).toEqual(expected);
  });

  it('writes a signature', () => {
    expect(signature('create', schema)).toBe('create(title: string, count?: integer, ratio?: number, state?: string, tags?: array|null)');
  });
});
