// The file-tool program run against a temporary directory standing in for /workspace: the same
// checks as in a pod, and a symlink race that the old check-then-open script could lose.
import type { Exec } from '@kubernetes/client-node';
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FILE_OPS_SCRIPT } from '../../../src/sessions/files-script.js';
import { listFilesInPod } from '../../../src/sessions/files.js';

let root: string;
let script: string;

function op(args: string[], stdin?: string): { code: number | null; out: string; err: string; raw: Buffer } {
  const r = spawnSync('python3', ['-I', '-S', '-c', script, ...args], { input: stdin ?? '', timeout: 10_000 });
  return { code: r.status, out: r.stdout.toString(), err: r.stderr.toString(), raw: r.stdout };
}

/** An Exec that runs the program here, against the temporary root, as the pod would. */
const localExec = {
  exec(_ns: string, _pod: string, _c: string, cmd: string[], out: NodeJS.WritableStream, _e: unknown, _in: unknown, _t: boolean, cb: (s: unknown) => void) {
    const r = op(cmd.slice(5).map((a) => a.replace('/workspace', root)));
    setImmediate(() => {
      out.write(r.raw);
      cb(
        r.code === 0
          ? { status: 'Success' }
          : { status: 'Failure', reason: 'NonZeroExitCode', details: { causes: [{ reason: 'ExitCode', message: String(r.code) }] } },
      );
    });
    return Promise.resolve({ readyState: 3, on() {}, close() {} });
  },
} as unknown as Exec;

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

  it('writes a name of 255 bytes, the most a name may have (its temporary name is short)', () => {
    const name = 'n'.repeat(255);
    expect(op(['write', `new/${name}`], 'x')).toMatchObject({ code: 0, out: '1\n' });
    expect(readFileSync(join(root, 'new', name), 'utf8')).toBe('x');
  });

  it('leaves a file that has its temporary name alone when it cannot write', () => {
    // The program's pid fixed, and a file of the session already named as its temporary one.
    writeFileSync(join(root, 'new/.codemode-write-7'), 'theirs');
    const r = spawnSync('python3', ['-I', '-S', '-c', `import os\nos.getpid = lambda: 7\n${script}`, 'write', 'new/mine'], { input: 'x', timeout: 10_000 });
    expect(r.status).toBe(7);
    expect(readFileSync(join(root, 'new/.codemode-write-7'), 'utf8')).toBe('theirs');
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

  it.each<[string, number]>([
    ['d', 4],
    ['out-dir/evil', 3],
    ['d/a.txt/under-a-file', 2],
  ])('reads all of its stdin before it refuses %s (exit %d), so the exec answers at once', (path, code) => {
    // A program that exits with its stdin unread may not answer until the gateway's watchdog
    // (measured on the cluster: 12 of 15 such 4 MiB execs waited out 20 s).
    const r = spawnSync('python3', ['-I', '-S', '-c', script, 'write', path], { input: Buffer.alloc(4 * 1024 * 1024, 1), timeout: 10_000 });
    expect(r.status).toBe(code);
    expect(r.error).toBeUndefined();
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
    expect(r.out).toBe('f\x005\x00a.txt\x00d\x00' + r.out.split('\0')[4] + '\x00sub\x00l\x005\x00up\x00');
  });

  it('lists files whose names are built to break or forge a listing, as they are', async () => {
    const dir = join(root, 'hostile');
    mkdirSync(dir);
    const names = ['x\nf\tNaN\tforged', '\n'.repeat(200) + 'many', 'f\t1\tfake\nd\t0\tfakedir', 'real.txt'];
    for (const n of names) writeFileSync(join(dir, n), 'abc');
    for (const b of [0xfe, 0xff]) writeFileSync(Buffer.concat([Buffer.from(dir + '/'), Buffer.from([b])]), 'abc');
    const listed = await listFilesInPod(localExec, 'ns', 'pod', '/workspace/hostile', 1000);
    expect(listed).toEqual({
      entries: [...names].sort().map((name) => ({ name, type: 'file', size: 3 })),
      truncated: false,
      unreadableNames: 2,
    });
    expect(await listFilesInPod(localExec, 'ns', 'pod', '/workspace/hostile', 2)).toMatchObject({ entries: [{ size: 3 }, { size: 3 }], truncated: true });
    // Every name listed opens again.
    for (const e of listed.entries) expect(op(['read', join(dir, e.name), '10']).out).toBe('abc');
  });

  it('prints no more than the gateway reads for the entries asked for, with names of the longest kind', async () => {
    const dir = join(root, 'long');
    mkdirSync(dir);
    for (let i = 0; i < 12; i++) writeFileSync(join(dir, String(i).padStart(2, '0') + '\n'.repeat(253)), '');
    const listed = await listFilesInPod(localExec, 'ns', 'pod', '/workspace/long', 10);
    expect(listed.entries).toHaveLength(10);
    expect(listed.truncated).toBe(true);
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
