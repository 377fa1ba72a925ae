// The file-tool program run against a temporary directory standing in for /workspace: the same
// checks as in a pod, and a symlink race that the old check-then-open script could lose.
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FILE_OPS_SCRIPT } from '../../../src/sessions/files-script.js';

let root: string;
let script: string;

function op(args: string[], stdin?: string): { code: number | null; out: string; err: string } {
  const r = spawnSync('python3', ['-I', '-S', '-c', script, ...args], { input: stdin ?? '', timeout: 10_000 });
  return { code: r.status, out: r.stdout.toString(), err: r.stderr.toString() };
}

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'ws-'));
  script = FILE_OPS_SCRIPT.replace('ROOT = b"/workspace"', `ROOT = b"${root}"`);
  mkdirSync(join(root, 'd/sub'), { recursive: true });
  writeFileSync(join(root, 'd/a.txt'), 'hello');
  writeFileSync(join(root, 'big'), 'x'.repeat(100));
  symlinkSync('d/a.txt', join(root, 'inside-rel'));
  symlinkSync(join(root, 'd'), join(root, 'inside-abs'));
  symlinkSync('/etc/passwd', join(root, 'out-file'));
  symlinkSync('/etc', join(root, 'out-dir'));
  symlinkSync('../..', join(root, 'd/up'));
  symlinkSync('loop', join(root, 'loop'));
  spawnSync('mkfifo', [join(root, 'fifo')]);
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('read', () => {
  it.each<[string, number, RegExp | string]>([
    ['d/a.txt', 0, 'hello'],
    ['/workspace/d/a.txt', 0, 'hello'],
    ['inside-rel', 0, 'hello'],
    ['inside-abs/a.txt', 0, 'hello'],
    ['out-file', 3, /outside \/workspace/],
    ['out-dir/passwd', 3, /outside \/workspace/],
    ['d/up/etc/passwd', 3, /outside \/workspace/],
    ['missing', 2, /no such file or directory: missing/],
    ['d/a.txt/x', 2, /no such file or directory/],
    ['d', 4, /not a regular file: d/],
    ['fifo', 4, /not a regular file: fifo/],
    ['big', 5, /the file is 100 bytes; the limit is 10 bytes/],
    ['loop', 2, /too many levels of symbolic links/],
  ])('%s → exit %d', (path, code, want) => {
    const r = op(['read', path.replace('/workspace', root), '10']);
    expect(r.code, r.err).toBe(code);
    if (typeof want === 'string') expect(r.out).toBe(want);
    else expect(r.err).toMatch(want);
  });
});

describe('write', () => {
  it('creates missing directories and replaces the file atomically', () => {
    expect(op(['write', 'new/deep/f.txt'], 'héllo')).toMatchObject({ code: 0, out: '6\n' });
    expect(readFileSync(join(root, 'new/deep/f.txt'), 'utf8')).toBe('héllo');
  });

  it.each<[string, number, RegExp]>([
    ['out-dir/evil', 3, /outside \/workspace/],
    ['out-file', 3, /outside \/workspace/],
    ['d', 4, /d is a directory/],
  ])('%s → exit %d', (path, code, want) => {
    const r = op(['write', path], 'x');
    expect(r.code).toBe(code);
    expect(r.err).toMatch(want);
  });

  it('writes through a symlink that stays inside', () => {
    expect(op(['write', 'inside-rel'], 'new').code).toBe(0);
    expect(readFileSync(join(root, 'd/a.txt'), 'utf8')).toBe('new');
    writeFileSync(join(root, 'd/a.txt'), 'hello');
  });
});

describe('list', () => {
  it('lists names sorted, with types and sizes, without following symlinks', () => {
    const r = op(['list', 'd', '10']);
    expect(r.code).toBe(0);
    expect(r.out).toBe('f\t5\ta.txt\nd\t' + r.out.split('\n')[1]!.split('\t')[1] + '\tsub\nl\t5\tup\n');
  });

  it.each<[string, number]>([
    ['out-dir', 3],
    ['d/a.txt', 4],
    ['missing', 2],
  ])('%s → exit %d', (path, code) => {
    expect(op(['list', path, '10']).code).toBe(code);
  });
});

describe('a symlink race', () => {
  // One python process runs the program 3000 times (a process each would take minutes here) while
  // another flips "race" between a file and a symlink to /etc/passwd. The old realpath-then-cat
  // script returned /etc/passwd about once in 150 reads under the same race, and this program
  // without O_NOFOLLOW 3 times in 3000.
  const driver = (n: number) => `
import io, sys
src = sys.stdin.read()
counts = {"safe": 0, "outside": 0, "other": 0}
for i in range(${n}):
    out = io.BytesIO()
    sys.stdout = io.TextIOWrapper(out)
    sys.stderr = io.StringIO()
    sys.argv = ["-c", "read", "race", "100000"]
    try:
        exec(compile(src, "files", "exec"), {"__name__": "__main__"})
    except SystemExit:
        pass
    sys.stdout.flush()
    data = out.getvalue()
    counts["safe" if data == b"safe" else "outside" if b"root:" in data else "other" if data else "other"] += 1
sys.__stdout__.write("%(safe)d %(outside)d %(other)d" % counts)
`;

  it('never returns content from outside while a path flips between a file and a symlink to /etc/passwd', () => {
    const racer = spawn('python3', [
      '-c',
      `
import os
r = ${JSON.stringify(root)}
while True:
    try:
        os.symlink("/etc/passwd", r + "/race.tmp"); os.rename(r + "/race.tmp", r + "/race")
        with open(r + "/file.tmp", "w") as f: f.write("safe")
        os.rename(r + "/file.tmp", r + "/race")
    except OSError:
        pass
`,
    ]);
    try {
      const r = spawnSync('python3', ['-I', '-S', '-c', driver(3000)], { input: script, timeout: 60_000 });
      const [safe = 0, outside = -1] = r.stdout.toString().split(' ').map(Number);
      expect(outside, r.stderr.toString()).toBe(0);
      expect(safe).toBeGreaterThan(0);
    } finally {
      racer.kill();
    }
  }, 90_000);
});
