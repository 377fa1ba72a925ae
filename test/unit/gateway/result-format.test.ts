// Which text a list of results becomes: TOON only for uniform tables, compact JSON otherwise.
import { decode } from '@toon-format/toon';
import { describe, expect, it } from 'vitest';
import { formatRows, isUniformTable } from '../../../src/gateway/tools/result-format.js';

const hits = [
  { server: 'github', name: 'create_issue', summary: 'Create an issue.', signature: '(repo: string, title: string)', score: 3.2 },
  { server: 'github', name: 'list_issues', summary: 'List issues, newest first.', signature: '(repo: string, state?: string)', score: 1.5 },
];

describe('isUniformTable', () => {
  it.each<[string, unknown[], boolean]>([
    ['search hits', hits, true],
    ['one row', [{ a: 1 }], true],
    [
      'nulls and booleans',
      [
        { a: null, b: true },
        { a: 2, b: false },
      ],
      true,
    ],
    ['no rows', [], false],
    ['other keys in a row', [{ a: 1 }, { b: 1 }], false],
    [
      'the same keys in another order',
      [
        { a: 1, b: 2 },
        { b: 2, a: 1 },
      ],
      false,
    ],
    ['a nested object', [{ a: { b: 1 } }], false],
    ['an array value', [{ a: [1] }], false],
    ['a row that is not an object', [{ a: 1 }, 'x'], false],
    ['an array row', [[1, 2]], false],
  ])('%s → %s', (_name, rows, uniform) => {
    expect(isUniformTable(rows)).toBe(uniform);
  });
});

describe('formatRows', () => {
  const text = (): string => 'as lines';
  it.each<[string, unknown[], 'text' | 'json' | 'toon', (out: string) => void]>([
    ['text keeps the caller’s lines', hits, 'text', (out) => expect(out).toBe('as lines')],
    ['json is compact JSON', hits, 'json', (out) => expect(out).toBe(JSON.stringify(hits))],
    [
      'toon writes a uniform table once, and decodes to the same rows',
      hits,
      'toon',
      (out) => {
        expect(out.split('\n')[0]).toBe('[2]{server,name,summary,signature,score}:');
        expect(decode(out)).toEqual(hits);
        expect(out.length).toBeLessThan(JSON.stringify(hits).length);
      },
    ],
    ['toon falls back to compact JSON for mixed rows', [{ a: 1 }, { b: [2] }], 'toon', (out) => expect(out).toBe('[{"a":1},{"b":[2]}]')],
  ])('%s', (_name, rows, format, check) => {
    check(formatRows(rows, format, text));
  });
});
