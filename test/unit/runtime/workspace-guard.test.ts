// /workspace on disk as both kernels measure it (runtime/python/codemode_kernel/bounds.py,
// runtime/node/bounds.js): each entry counts at least 4 KiB against the limit, so empty files
// cannot use up the node's inodes, and a session's guard ends it once the limit is passed.
import { execFileSync } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, unlinkSync, writeFileSync, writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '../../..');
const require = createRequire(import.meta.url);
const nodeBounds = require(join(ROOT, 'runtime/node/bounds.js')) as {
  workspaceUsage(limit: number, root: string): { entries: number; bytes: number; over: boolean };
  startWorkspaceGuard(
    limit: number,
    onOver: (files: boolean) => void,
    opts: { root: string; periodMs: number; walkAtLeastMs: number },
  ): NodeJS.Timeout | undefined;
};

function pythonUsage(limit: number, root: string): { entries: number; over: boolean } {
  const script =
    'import json, sys\nfrom codemode_kernel import bounds\ne, b, o = bounds.workspace_usage(int(sys.argv[1]), sys.argv[2])\nprint(json.dumps(dict(entries=e, over=o)))';
  const out = execFileSync('python3', ['-B', '-c', script, String(limit), root], { env: { ...process.env, PYTHONPATH: join(ROOT, 'runtime/python') } });
  return JSON.parse(out.toString('utf8')) as { entries: number; over: boolean };
}

const usage = {
  python: pythonUsage,
  node: (limit: number, root: string) => {
    const { entries, over } = nodeBounds.workspaceUsage(limit, root);
    return { entries, over };
  },
};

/** Ten entries' worth: 40 KiB at 4 KiB each. */
const LIMIT = 40 * 1024;

/** Descriptors the rows keep open (deleted files): closed after each row. */
const held: number[] = [];

/** A file of `bytes` under `dir`, deleted while this process keeps it open (on `times` descriptors). */
function deletedOpen(dir: string, name: string, bytes: number, times = 1): void {
  const p = join(dir, name);
  const fd = openSync(p, 'w');
  writeSync(fd, Buffer.alloc(bytes, 1));
  held.push(fd);
  for (let i = 1; i < times; i++) held.push(openSync(p, 'r'));
  unlinkSync(p);
}

describe.each(['python', 'node'] as const)('%s kernel: /workspace usage', (language) => {
  let dir = '';
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'ws-'));
  });
  afterEach(() => {
    for (const fd of held.splice(0)) closeSync(fd);
    rmSync(dir, { recursive: true, force: true });
  });

  const emptyFiles = (n: number, under = dir): void => {
    for (let i = 0; i < n; i++) writeFileSync(join(under, `f${String(i)}`), '');
  };

  it.each([
    ['ten empty files: at the limit', () => emptyFiles(10), { entries: 10, over: false }],
    ['eleven empty files: past it', () => emptyFiles(11), { over: true }],
    ['a directory and its files count alike', (d: string) => (mkdirSync(join(d, 'sub')), emptyFiles(9, join(d, 'sub'))), { entries: 10, over: false }],
    ['one file past the limit in bytes', (d: string) => writeFileSync(join(d, 'big'), Buffer.alloc(LIMIT + 8192, 1)), { entries: 1, over: true }],
    ['nothing', () => undefined, { entries: 0, over: false }],
    // du does not see them, and a program can go on writing to them (found through /proc/<pid>/fd).
    ['a deleted file still open, past the limit in bytes', (d: string) => deletedOpen(d, 'gone', LIMIT + 8192), { entries: 1, over: true }],
    ['a deleted file still open, within it', (d: string) => deletedOpen(d, 'gone', 8192), { entries: 1, over: false }],
    ['a deleted file open three times counts once', (d: string) => deletedOpen(d, 'gone', LIMIT / 2, 3), { entries: 1, over: false }],
  ])('%s', (_n, make, expected) => {
    make(dir);
    expect(usage[language](LIMIT, dir)).toMatchObject(expected);
  });
});

// The guard walks only when the filesystem grew enough since its last walk to put /workspace past
// its limit; other processes' deletes on this machine can hide that growth, so these rows also
// walk every 0.1 s (a minute in a pod): they check what a walk that finds it over does.
describe('the session guard', () => {
  let dir = '';
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'ws-guard-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('python: calls back once /workspace is past its limit, and not before', () => {
    const script = [
      'import sys, threading, time',
      'from codemode_kernel import bounds',
      'root = sys.argv[1]',
      'hit = threading.Event(); said = []',
      'def over(files):',
      '    said.append(files); hit.set()',
      'bounds.WorkspaceGuard(40960, over, period_s=0.01, walk_at_least_s=0.1, root=root).start()',
      'for i in range(10): open("%s/f%d" % (root, i), "w").close()',
      'time.sleep(0.3)',
      'before = hit.is_set()',
      'open(root + "/f10", "w").close()',
      'print(before, hit.wait(5), said)',
    ].join('\n');
    const out = execFileSync('python3', ['-B', '-c', script, dir], { env: { ...process.env, PYTHONPATH: join(ROOT, 'runtime/python') } });
    expect(out.toString('utf8').trim()).toBe('False True [True]');
  });

  it('node: calls back once /workspace is past its limit, and not before', async () => {
    const said: boolean[] = [];
    const timer = nodeBounds.startWorkspaceGuard(LIMIT, (files) => said.push(files), { root: dir, periodMs: 10, walkAtLeastMs: 100 });
    try {
      for (let i = 0; i < 10; i++) writeFileSync(join(dir, `f${String(i)}`), '');
      await new Promise((r) => setTimeout(r, 300));
      expect(said).toEqual([]);
      writeFileSync(join(dir, 'f10'), '');
      const until = Date.now() + 5000;
      while (said.length === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
      expect(said).toEqual([true]);
    } finally {
      clearInterval(timer);
    }
  });
});
