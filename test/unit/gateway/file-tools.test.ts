// list_files' text: one line per entry, whatever code in the session named its files; read_file's
// text: the file's bytes exactly, or a refusal when they are not text.
import { describe, expect, it } from 'vitest';
import { fileText, shownName } from '../../../src/gateway/tools/files.js';

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

describe('fileText', () => {
  it.each<[string, Buffer, string | RegExp]>([
    ['plain text', Buffer.from('a,b\n1,2\n'), 'a,b\n1,2\n'],
    ['a leading byte-order mark is kept (all the bytes, as size says)', Buffer.from([0xef, 0xbb, 0xbf, 0x61]), '\ufeffa'],
    ['tabs, newlines and carriage returns', Buffer.from('\t\r\n'.repeat(1000)), '\t\r\n'.repeat(1000)],
    ['quotes and backslashes (twice as JSON, at most)', Buffer.from('"\\'.repeat(1000)), '"\\'.repeat(1000)],
    ['a few control characters in text', Buffer.from(`${'x'.repeat(100)}\u0001\u001b[0m`), `${'x'.repeat(100)}\u0001\u001b[0m`],
    ['invalid UTF-8', Buffer.from([0x61, 0xff]), /^is not valid UTF-8 text$/],
    ['bytes that are mostly control characters', Buffer.alloc(1024, 1), /^is not text \(mostly control characters: its 1024 bytes would be 6144 as JSON\)$/],
  ])('%s', (_name, bytes, want) => {
    const r = fileText(bytes);
    if (typeof want === 'string') {
      expect(r).toEqual({ text: want });
      expect(Buffer.from(want).equals(bytes)).toBe(true);
    } else expect('problem' in r && r.problem).toMatch(want);
  });

  it('keeps the reply of any text it accepts within twice its bytes as JSON', () => {
    for (const b of [0x01, 0x08, 0x1f, 0x22, 0x5c, 0x61]) {
      for (const share of [0.1, 0.2, 0.25, 0.5, 1]) {
        const bytes = Buffer.alloc(1000, 0x61);
        bytes.fill(b, 0, Math.round(1000 * share));
        const r = fileText(bytes);
        if ('text' in r) expect(JSON.stringify(r.text).length - 2).toBeLessThanOrEqual(2 * bytes.length);
      }
    }
  });
});
