// The kernel framing (runtime/PROTOCOL.md): TypeScript codec, and agreement with the Python kernel's.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FrameDecoder, encodeFrame } from '../../../src/exec/framing.js';
import { RUNTIME_DIR } from './harness.js';

const messages = [
  { id: '1', op: 'ping' },
  { id: '2', op: 'exec', code: 'print("héllo ✓ 🎉")\n' },
  { id: '3', text: '' },
];

function splitEvery(buf: Buffer, size: number): Buffer[] {
  const parts: Buffer[] = [];
  for (let i = 0; i < buf.length; i += size) parts.push(buf.subarray(i, i + size));
  return parts;
}

describe('framing', () => {
  it('writes the byte length (not the character count) in the header', () => {
    expect(encodeFrame({ t: 'é' }).toString('utf8')).toBe('10\n{"t":"é"}');
  });

  it.each([1, 2, 7, 1000])('decodes frames however the stream is split (%i-byte chunks)', (size) => {
    const decoder = new FrameDecoder();
    const stream = Buffer.concat(messages.map(encodeFrame));
    const out = splitEvery(stream, size).flatMap((chunk) => decoder.push(chunk));
    expect(out).toEqual(messages);
    expect(decoder.buffered).toBe(0);
  });

  it.each([
    ['a non-numeric header', 'abc\n{}', /Malformed frame header "abc"/],
    ['a header without newline', '1'.repeat(21), /no newline/],
    ['a frame above the limit', '2000\n', /exceeds the limit of 1000/],
  ])('rejects %s', (_name, input, error) => {
    expect(() => new FrameDecoder(1000).push(Buffer.from(input))).toThrow(error);
  });

  it('agrees byte for byte with the Python kernel', () => {
    const script = `import json, sys\nsys.path.insert(0, ${JSON.stringify(join(RUNTIME_DIR, 'python'))})\nfrom codemode_kernel.framing import encode\nsys.stdout.buffer.write(b"".join(encode(m) for m in json.loads(sys.stdin.read())))`;
    const fromPython = execFileSync('python3', ['-B', '-c', script], { input: JSON.stringify(messages) });
    expect(fromPython.equals(Buffer.concat(messages.map(encodeFrame)))).toBe(true);
  });

  // A call's last output and display frames are held for its result: one write, so one message
  // through the relay and the exec stream. Counted on a socket that records its writes.
  it.each([
    ['frames sent one by one', [false, false, false], 3],
    ['held frames, then the result', [true, true, false], 1],
    ['a held frame, the result, then a frame of the next call', [true, false, false], 2],
  ])('the Python kernel writes %s as the expected number of writes', (_name, holds, writes) => {
    const script = [
      'import json, sys',
      `sys.path.insert(0, ${JSON.stringify(join(RUNTIME_DIR, 'python'))})`,
      'from codemode_kernel.server import Connection',
      'class Sock:',
      '    def __init__(self): self.writes = []',
      '    def sendall(self, data): self.writes.append(data.decode())',
      'sock = Sock(); conn = Connection(sock)',
      'for m, hold in zip(*json.loads(sys.stdin.read())): conn.send(m, hold=hold)',
      'print(json.dumps(sock.writes))',
    ].join('\n');
    const out = JSON.parse(execFileSync('python3', ['-B', '-c', script], { input: JSON.stringify([messages, holds]) }).toString('utf8')) as string[];
    expect(out).toHaveLength(writes);
    expect(out.join('')).toBe(Buffer.concat(messages.map(encodeFrame)).toString('utf8'));
  });
});
