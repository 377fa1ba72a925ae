// list_files' text: one line per entry, whatever code in the session named its files.
import { describe, expect, it } from 'vitest';
import { shownName } from '../../../src/gateway/tools/files.js';

describe('shownName', () => {
  it.each<[string, string]>([
    ['report.csv', 'report.csv'],
    ['with space', 'with space'],
    ['ünïcødé', 'ünïcødé'],
    ['x\nf\tNaN\tforged', '"x\\nf\\tNaN\\tforged"'],
    ['bell\u0007', '"bell\\u0007"'],
    ['del\u007f', '"del\u007f"'],
    ['"quoted"', '"\\"quoted\\""'],
  ])('%j is shown as %s', (name, shown) => {
    expect(shownName(name)).toBe(shown);
    expect(shownName(name)).not.toMatch(/[\n\r\t]/);
  });
});
