import { describe, expect, it } from 'vitest';
import {
  MAX_SIGNATURE_CHARS,
  MAX_SUMMARY_CHARS,
  describeTool,
  renderSignature,
  renderType,
  signatureLine,
  summarize,
} from '../../../src/upstreams/signature.js';
import type { UpstreamTool } from '../../../src/upstreams/types.js';

describe('renderType', () => {
  it.each<[string, unknown, string]>([
    ['string', { type: 'string' }, 'string'],
    ['integer array', { type: 'array', items: { type: 'integer' } }, 'integer[]'],
    ['enum', { type: 'string', enum: ['open', 'closed'] }, '"open"|"closed"'],
    ['long enum', { enum: [1, 2, 3, 4, 5, 6, 7] }, '1|2|3|4|5|6|…'],
    ['const', { const: 'x' }, '"x"'],
    ['nullable via type list', { type: ['string', 'null'] }, 'string|null'],
    ['anyOf', { anyOf: [{ type: 'string' }, { type: 'number' }] }, 'string|number'],
    ['array of union', { type: 'array', items: { anyOf: [{ type: 'string' }, { type: 'number' }] } }, '(string|number)[]'],
    ['object', { type: 'object', properties: { a: {} } }, 'object'],
    ['untyped with properties', { properties: { a: {} } }, 'object'],
    ['no schema', undefined, 'any'],
    ['garbage', 'not a schema', 'any'],
    ['a type list naming a type twice', { type: ['array', 'null', 'array'], items: { type: 'string' } }, 'string[]|null'],
    ['many alternatives', { anyOf: Array.from({ length: 40 }, (_, i) => ({ const: i })) }, `${Array.from({ length: 16 }, (_, i) => i).join('|')}|…`],
  ])('%s', (_name, schema, expected) => {
    expect(renderType(schema)).toBe(expected);
  });

  // The schemas come from upstreams: what one makes the gateway do per search hit is bounded.
  it('renders the items of a type list repeating "array" once per level', () => {
    let reads = 0;
    const counted = (inner: unknown): object =>
      Object.defineProperty({ type: Array(1000).fill('array') }, 'items', {
        enumerable: true,
        get: () => (reads++, inner),
      });
    expect(renderType(counted(counted({ type: 'string' })))).toBe('any[][]');
    expect(reads).toBe(2);
  });
});

describe('renderSignature', () => {
  it.each<[string, unknown, string]>([
    ['one required', { type: 'object', properties: { message: { type: 'string' } }, required: ['message'] }, '(message: string)'],
    [
      'required first, optional with default',
      { type: 'object', properties: { count: { type: 'integer', default: 1 }, title: { type: 'string' } }, required: ['title'] },
      '(title: string, count?: integer = 1)',
    ],
    ['no parameters', { type: 'object' }, '()'],
    ['not an object', null, '()'],
  ])('%s', (_name, schema, expected) => {
    expect(renderSignature(schema)).toBe(expected);
  });

  it.each<[string, string[]]>([
    ['optional', []],
    ['required', Array.from({ length: 10_000 }, (_, i) => `p${i}`)],
  ])('reads only the %s parameters that fit the line', (_name, required) => {
    const read = new Set<PropertyKey>();
    const properties = new Proxy(Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`p${i}`, { type: 'string' }])), {
      get: (target, key) => (read.add(key), target[key as string]),
    });
    const sig = renderSignature({ type: 'object', properties, required });
    expect(sig).toMatch(/^\(p0\??: string, p1\??: string, .*, …\)$/);
    expect(read.size).toBeLessThan(50);
  });

  it('ends a long list with … within the bound', () => {
    const properties = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`parameter_${i}`, { type: 'string' }]));
    const sig = renderSignature({ type: 'object', properties });
    expect(sig.length).toBeLessThanOrEqual(MAX_SIGNATURE_CHARS);
    expect(sig).toMatch(/^\(parameter_0\?: string, .*, …\)$/);
  });
});

describe('summarize', () => {
  it.each<[string, string | undefined, string]>([
    ['first sentence', 'Echoes back the input. Useful for tests.', 'Echoes back the input.'],
    ['first line', 'Lists issues\nMore text here.', 'Lists issues'],
    ['collapses spaces', '  Adds   two numbers  ', 'Adds two numbers'],
    ['dots inside words stay', 'Reads v1.2 files. Then more.', 'Reads v1.2 files.'],
    ['nothing', undefined, ''],
  ])('%s', (_name, input, expected) => {
    expect(summarize(input)).toBe(expected);
  });

  it('cuts a long sentence with …', () => {
    const s = summarize('x'.repeat(500));
    expect(s.length).toBe(MAX_SUMMARY_CHARS);
    expect(s.endsWith('…')).toBe(true);
  });
});

const echo: UpstreamTool = {
  server: 'everything',
  name: 'echo',
  title: 'Echo Tool',
  description: 'Echoes back the input string. Nothing else.',
  inputSchema: { type: 'object', properties: { message: { type: 'string', description: 'Message to echo' } }, required: ['message'] },
  annotations: { readOnlyHint: true },
};

describe('describeTool', () => {
  it.each([
    ['name', { level: 'name', server: 'everything', name: 'echo' }],
    ['summary', { level: 'summary', server: 'everything', name: 'echo', summary: 'Echoes back the input string.', signature: '(message: string)' }],
    [
      'full',
      {
        level: 'full',
        server: 'everything',
        name: 'echo',
        title: 'Echo Tool',
        description: 'Echoes back the input string. Nothing else.',
        signature: '(message: string)',
        inputSchema: echo.inputSchema,
        annotations: { readOnlyHint: true },
      },
    ],
  ] as const)('level %s', (level, expected) => {
    expect(describeTool(echo, level)).toEqual(expected);
  });

  it('renders one line per tool', () => {
    expect(signatureLine({ server: 'everything', name: 'echo', signature: '(message: string)', summary: 'Echoes.' })).toBe(
      'everything.echo(message: string) — Echoes.',
    );
    expect(signatureLine({ server: 's', name: 't', signature: '()', summary: '' })).toBe('s.t()');
  });
});
