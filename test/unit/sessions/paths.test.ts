import { describe, expect, it } from 'vitest';
import { PathError, workspacePath } from '../../../src/sessions/paths.js';
import { FrameDecoder, encodeFrame } from '../../../src/exec/framing.js';
import { buildRuntimeConfigMap, runtimeItems } from '../../../src/sandbox/runtime-configmap.js';

describe('workspacePath', () => {
  it.each([
    ['data.csv', '/workspace/data.csv'],
    ['./a/b.txt', '/workspace/a/b.txt'],
    ['.', '/workspace'],
    ['/workspace/x', '/workspace/x'],
    ['/workspace/', '/workspace'],
    ['a//b/', '/workspace/a/b'],
    // Names are exact: a program can make a file whose name ends in a space or a newline.
    ['notes ', '/workspace/notes '],
    [' lead/x\n', '/workspace/ lead/x\n'],
  ])('%j → %j', (input, out) => {
    expect(workspacePath(input)).toBe(out);
  });

  it('takes a name with a character outside the basic plane (a surrogate pair) as it is', () => {
    expect(workspacePath('emoji\u{1F600}.txt')).toBe('/workspace/emoji\u{1F600}.txt');
  });

  it.each([
    ['../etc/passwd', /contains "\.\."/],
    ['a/../../b', /contains "\.\."/],
    ['/etc/passwd', /outside \/workspace/],
    ['/workspacex/a', /outside \/workspace/],
    ['/tmp', /outside \/workspace/],
    ['', /empty/],
    [' \n\t', /empty/],
    ['a\0b', /NUL/],
    // A lone surrogate merged with the next character on its way to the pod (the exec URL): the
    // '.' or '/' after it was swallowed and the file written under another name.
    ['report\ud800.csv', /not valid Unicode \(it has an unpaired surrogate\)/],
    ['dir\ud800/secret.txt', /unpaired surrogate/],
    ['end\ud800', /unpaired surrogate/],
    ['\udc00start', /unpaired surrogate/],
  ])('refuses %j', (input, message) => {
    expect(() => workspacePath(input)).toThrow(PathError);
    expect(() => workspacePath(input)).toThrow(message);
  });
});

describe('kernel framing', () => {
  it('round-trips messages split at any byte', () => {
    const msgs = [{ id: '1', text: 'héllo' }, { id: '2', big: 'x'.repeat(5000) }, { id: '3' }];
    const wire = Buffer.concat(msgs.map(encodeFrame));
    for (const step of [1, 3, 7, 4096, wire.length]) {
      const d = new FrameDecoder();
      const out: unknown[] = [];
      for (let i = 0; i < wire.length; i += step) out.push(...d.push(wire.subarray(i, i + step)));
      expect(out).toEqual(msgs);
    }
  });

  it('rejects garbage instead of waiting forever', () => {
    expect(() => new FrameDecoder().push(Buffer.from('hello world\n'))).toThrow(/Malformed frame header/);
    expect(() => new FrameDecoder(10).push(Buffer.from('11\n'))).toThrow(/exceeds/);
  });
});

describe('runtime ConfigMap', () => {
  it('flattens paths into keys and maps them back with items', () => {
    const cm = buildRuntimeConfigMap('ns', { 'python/kernel.py': 'k', 'node/kernel.js': 'n' });
    expect(cm.data).toEqual({ 'node__kernel.js': 'n', 'python__kernel.py': 'k' });
    expect(runtimeItems(['python/kernel.py', 'node/kernel.js'])).toEqual([
      { key: 'node__kernel.js', path: 'node/kernel.js' },
      { key: 'python__kernel.py', path: 'python/kernel.py' },
    ]);
  });
});
