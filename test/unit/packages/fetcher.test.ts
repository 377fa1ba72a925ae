// The fetcher pod and its NetworkPolicy (pure builders), the fetcher's exit codes as errors, and
// the session-side program run against a temporary directory standing in for /workspace: chunks
// appended at offsets, a damaged archive refused, an upgrade replacing the old version's files, no
// archive left behind by a failed install (and none followed through a link sandbox code made).
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, lutimesSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LABEL_PACKAGE_FETCHER, LABEL_SANDBOX } from '../../../src/api/v1alpha1/index.js';
import { buildFetcherNetworkPolicy, buildFetcherPod, cidrWithin } from '../../../src/packages/fetcher.js';
import { stepError } from '../../../src/packages/installer.js';
import { SESSION_SCRIPT } from '../../../src/packages/scripts.js';

const opts = {
  packagesEgressCidrs: ['0.0.0.0/0', '203.0.113.0/24'],
  packagesEgressExcept: ['10.0.0.0/8', '169.254.0.0/16'],
  packagesTimeoutSeconds: 300,
  imagePullPolicy: 'IfNotPresent' as const,
};

describe('cidrWithin', () => {
  it.each<[string, string, boolean]>([
    ['10.0.0.0/8', '0.0.0.0/0', true],
    ['10.1.0.0/16', '10.0.0.0/8', true],
    ['10.0.0.0/8', '10.0.0.0/16', false],
    ['10.0.0.0/8', '203.0.113.0/24', false],
    ['203.0.113.80/32', '203.0.113.0/24', true],
    ['fd00::/8', '::/0', true],
    ['fd00::/8', '0.0.0.0/0', false],
    ['10.0.0.0/8', '::/0', false],
  ])('%s inside %s: %s', (inner, outer, want) => expect(cidrWithin(inner, outer)).toBe(want));
});

describe('buildFetcherNetworkPolicy', () => {
  const p = buildFetcherNetworkPolicy('ns', opts);
  it('selects fetcher pods only, no ingress, DNS, and 80/443 to the ranges minus the excepts each holds', () => {
    expect(p.spec?.podSelector).toEqual({ matchExpressions: [{ key: LABEL_PACKAGE_FETCHER, operator: 'Exists' }] });
    expect(p.spec?.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(p.spec?.ingress).toBeUndefined();
    expect(p.spec?.egress?.[0]?.to).toBeUndefined();
    expect(p.spec?.egress?.[0]?.ports?.map((x) => x.port)).toEqual([53, 53]);
    expect(p.spec?.egress?.[1]?.to).toEqual([
      { ipBlock: { cidr: '0.0.0.0/0', except: ['10.0.0.0/8', '169.254.0.0/16'] } },
      { ipBlock: { cidr: '203.0.113.0/24' } },
    ]);
    expect(p.spec?.egress?.[1]?.ports?.map((x) => x.port)).toEqual([443, 80]);
  });
});

describe('buildFetcherPod', () => {
  const pod = buildFetcherPod(
    {
      namespace: 'ns',
      image: 'img:v1',
      owner: { apiVersion: 'v1', kind: 'SandboxSession', name: 's', uid: 'u' },
      session: 's',
      maxTotalBytes: 100 * 1024 * 1024,
    },
    opts,
  );
  const c = pod.spec?.containers[0];
  it("runs where the session's profile places its pods, and anywhere without a placement", () => {
    const placement = { nodeSelector: { pool: 'sandbox' }, tolerations: [{ key: 'dedicated', operator: 'Exists' as const }] };
    const placed = buildFetcherPod(
      { namespace: 'ns', image: 'img:v1', owner: { apiVersion: 'v1', kind: 'SandboxSession', name: 's', uid: 'u' }, session: 's', maxTotalBytes: 1, placement },
      opts,
    );
    expect(placed.spec).toMatchObject(placement);
    expect(pod.spec).not.toHaveProperty('nodeSelector');
    expect(pod.spec).not.toHaveProperty('tolerations');
  });
  it('is hardened like a sandbox but not labelled as one (its own policy applies), owned by its session, with a deadline', () => {
    expect(pod.metadata?.labels?.[LABEL_SANDBOX]).toBeUndefined();
    expect(pod.metadata?.labels?.[LABEL_PACKAGE_FETCHER]).toBe('s');
    expect(pod.metadata?.ownerReferences?.[0]).toMatchObject({ kind: 'SandboxSession', uid: 'u' });
    expect(pod.spec).toMatchObject({ automountServiceAccountToken: false, enableServiceLinks: false, activeDeadlineSeconds: 360 });
    expect(c?.securityContext).toMatchObject({
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
      runAsNonRoot: true,
    });
    expect(c?.resources?.limits).toEqual({ cpu: '1', memory: '1Gi' });
    expect(pod.spec?.volumes?.[0]?.emptyDir?.sizeLimit).toBe('556Mi');
  });
});

describe('stepError', () => {
  it.each<[string, { exitCode?: number; stderr: string; error?: string; overflow: boolean }, RegExp, string]>([
    [
      'a resolution failure',
      { exitCode: 4, stderr: 'ERROR: Could not find a version\nERROR: No matching distribution found for nosuch\n', overflow: false },
      /could not be resolved: .*No matching distribution found for nosuch/,
      'failed',
    ],
    ['a limit', { exitCode: 5, stderr: 'x.whl is 9 bytes; the largest package allowed is 1 bytes\n', overflow: false }, /x\.whl is 9 bytes/, 'refused'],
    ['an exec that never answered', { stderr: '', error: 'no result within 10 ms', overflow: false }, /no result within 10 ms/, 'failed'],
    ['npm noise dropped', { exitCode: 4, stderr: 'npm warn deprecated\nnpm error 404 Not Found - GET x\n', overflow: false }, /404 Not Found/, 'failed'],
    ['an oversized answer (its stream closed there)', { stderr: '', error: 'more than 1024 bytes of output', overflow: true }, /too large/, 'refused'],
    [
      "an index URL with credentials in pip's words",
      { exitCode: 4, stderr: 'ERROR: Could not fetch URL https://alice:****@nexus.example/simple/x/: 503\n', overflow: false },
      /could not be resolved: ERROR: Could not fetch URL https:\/\/nexus\.example\/simple\/x\/: 503$/,
      'failed',
    ],
    [
      'escape sequences from a package',
      { exitCode: 4, stderr: 'ERROR: x\r\u001b[2J\u001b]0;owned\u0007 FAKE: installed\n', overflow: false },
      /could not be resolved: ERROR: x {2}\[2J \]0;owned {2}FAKE: installed$/,
      'failed',
    ],
  ])('%s', (_, r, msg, kind) => {
    const e = stepError('resolve', r);
    expect(e.message).toMatch(msg);
    expect(e.message).not.toMatch(/npm warn/);
    expect(e.kind).toBe(kind);
  });
});

describe('the session-side program', () => {
  /** The install timeout the installer passes to `append` (packagesTimeoutSeconds). */
  const TIMEOUT = '300';
  let dir: string;
  const run = (args: string[], input?: Buffer) => {
    const r = spawnSync('python3', ['-I', '-S', '-c', SESSION_SCRIPT, ...args], { input: input ?? Buffer.alloc(0), timeout: 10_000 });
    return { code: r.status, out: r.stdout.toString(), err: r.stderr.toString(), stdinError: r.error };
  };
  /** A .tgz of `files` (path → content), built by the system's tar like the fetcher's archive. */
  const archive = (name: string, files: Record<string, string>): { path: string; sha: string } => {
    const src = join(dir, `src-${name}`);
    for (const [p, content] of Object.entries(files)) {
      mkdirSync(join(src, p, '..'), { recursive: true });
      writeFileSync(join(src, p), content);
    }
    const path = join(dir, `${name}.tgz`);
    expect(spawnSync('tar', ['-czf', path, '-C', src, '.']).status).toBe(0);
    return { path, sha: createHash('sha256').update(readFileSync(path)).digest('hex') };
  };
  const deliver = (a: { path: string; sha: string }, dest: string) => {
    const bytes = readFileSync(a.path);
    const incoming = join(dir, 'ws/.packages/.incoming.tgz');
    const half = Math.floor(bytes.length / 2);
    expect(run(['append', incoming, '0', TIMEOUT], bytes.subarray(0, half)).out.trim()).toBe(String(half));
    expect(run(['append', incoming, String(half), TIMEOUT], bytes.subarray(half)).out.trim()).toBe(String(bytes.length));
    return run(['extract', incoming, dest, a.sha]);
  };

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'pkgs-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('unpacks an archive delivered in chunks, then removes it', () => {
    const a = archive('one', { 'mod/__init__.py': 'x = 1\n', 'mod-1.0.dist-info/RECORD': 'mod/__init__.py,,\n' });
    const r = deliver(a, join(dir, 'ws/.packages/python'));
    expect(r.code, r.err).toBe(0);
    expect(readFileSync(join(dir, 'ws/.packages/python/mod/__init__.py'), 'utf8')).toBe('x = 1\n');
    expect(existsSync(join(dir, 'ws/.packages/.incoming.tgz'))).toBe(false);
  });

  it('refuses an archive whose sha256 is not the one the gateway computed, and removes it', () => {
    const a = archive('one', { 'a.txt': 'a' });
    const r = deliver({ ...a, sha: 'c'.repeat(64) }, join(dir, 'ws/x'));
    expect(r.code).toBe(3);
    expect(r.err).toMatch(/arrived damaged/);
    expect(existsSync(join(dir, 'ws/.packages/.incoming.tgz'))).toBe(false);
    expect(existsSync(join(dir, 'ws/x'))).toBe(false);
  });

  it('removes an archive it cannot unpack', () => {
    const path = join(dir, 'garbage.tgz');
    writeFileSync(path, 'not a gzip archive');
    const r = deliver({ path, sha: createHash('sha256').update('not a gzip archive').digest('hex') }, join(dir, 'ws/x'));
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/ReadError|not a gzip/);
    expect(existsSync(join(dir, 'ws/.packages/.incoming.tgz'))).toBe(false);
  });

  it('reads the whole chunk before it fails, so the exec answers at once', () => {
    writeFileSync(join(dir, 'not-a-dir'), 'x');
    const r = run(['append', join(dir, 'not-a-dir/.incoming.tgz'), '0', TIMEOUT], Buffer.alloc(4 * 1024 * 1024, 1));
    expect(r.code).toBe(1);
    expect(r.stdinError).toBeUndefined();
  });

  it('discards an archive, a link without following it, and succeeds when there is nothing', () => {
    const packages = join(dir, 'ws/.packages');
    mkdirSync(packages, { recursive: true });
    writeFileSync(join(packages, '.incoming-a.tgz'), 'partial');
    writeFileSync(join(dir, 'precious'), 'x');
    symlinkSync(join(dir, 'precious'), join(packages, '.incoming-b.tgz'));
    for (const name of ['.incoming-a.tgz', '.incoming-b.tgz', '.incoming-a.tgz', '.incoming-none.tgz']) {
      const r = run(['discard', join(packages, name)]);
      expect(r.code, r.err).toBe(0);
    }
    expect(readdirSync(packages)).toEqual([]);
    expect(readFileSync(join(dir, 'precious'), 'utf8')).toBe('x');
  });

  it('the first chunk removes archives older than the install timeout: only files and links, never what a link points to', () => {
    const packages = join(dir, 'ws/.packages');
    mkdirSync(join(packages, '.incoming-dir.tgz'), { recursive: true });
    writeFileSync(join(packages, '.incoming-dir.tgz/inside'), 'x');
    const old = Date.now() / 1000 - 301;
    for (const name of ['.incoming-old.tgz', '.incoming-fresh.tgz', 'other.tgz', '.incoming-old.txt']) writeFileSync(join(packages, name), 'x');
    for (const name of ['.incoming-old.tgz', 'other.tgz', '.incoming-old.txt', '.incoming-dir.tgz']) utimesSync(join(packages, name), old, old);
    writeFileSync(join(dir, 'precious'), 'x');
    utimesSync(join(dir, 'precious'), old, old);
    symlinkSync(join(dir, 'precious'), join(packages, '.incoming-evil.tgz'));
    lutimesSync(join(packages, '.incoming-evil.tgz'), old, old);
    symlinkSync(join(dir, 'precious'), join(packages, '.incoming-evil-fresh.tgz'));

    const r = run(['append', join(packages, '.incoming-new.tgz'), '0', TIMEOUT], Buffer.from('abc'));
    expect(r.code, r.err).toBe(0);
    expect(readdirSync(packages).sort()).toEqual([
      '.incoming-dir.tgz',
      '.incoming-evil-fresh.tgz',
      '.incoming-fresh.tgz',
      '.incoming-new.tgz',
      '.incoming-old.txt',
      'other.tgz',
    ]);
    expect(readdirSync(join(packages, '.incoming-dir.tgz'))).toEqual(['inside']);
    expect(readFileSync(join(dir, 'precious'), 'utf8')).toBe('x');
    expect(lstatSync(join(packages, '.incoming-evil-fresh.tgz')).isSymbolicLink()).toBe(true);

    // A later chunk removes nothing: the sweep is once per install.
    utimesSync(join(packages, '.incoming-fresh.tgz'), old, old);
    expect(run(['append', join(packages, '.incoming-new.tgz'), '3', TIMEOUT], Buffer.from('def')).code).toBe(0);
    expect(existsSync(join(packages, '.incoming-fresh.tgz'))).toBe(true);
    expect(readFileSync(join(packages, '.incoming-new.tgz'), 'utf8')).toBe('abcdef');
  });

  it("replaces an older version: its RECORD's files and dist-info go, other packages stay", () => {
    const dest = join(dir, 'ws/.packages/python');
    deliver(archive('old', { 'tab.py': 'old\n', 'Tab-0.9.dist-info/RECORD': 'tab.py,,\nTab-0.9.dist-info/RECORD,,\n', 'other/__init__.py': '' }), dest);
    const r = deliver(archive('new', { 'tab/__init__.py': 'new\n', 'tab-0.10.dist-info/RECORD': 'tab/__init__.py,,\n' }), dest);
    expect(r.code, r.err).toBe(0);
    expect(readdirSync(dest).sort()).toEqual(['other', 'tab', 'tab-0.10.dist-info']);
  });

  it('replaces an npm package directory, scoped or not', () => {
    deliver(archive('n1', { 'node_modules/a/old.js': '', 'node_modules/@s/p/old.js': '', 'node_modules/b/keep.js': '' }), join(dir, 'ws'));
    deliver(archive('n2', { 'node_modules/a/new.js': '', 'node_modules/@s/p/new.js': '' }), join(dir, 'ws'));
    expect(readdirSync(join(dir, 'ws/node_modules/a'))).toEqual(['new.js']);
    expect(readdirSync(join(dir, 'ws/node_modules/@s/p'))).toEqual(['new.js']);
    expect(readdirSync(join(dir, 'ws/node_modules/b'))).toEqual(['keep.js']);
  });

  /** A .tgz of entries as a hostile fetcher could write them: [name, content] a file, [name, '->', target] a link. */
  const crafted = (name: string, entries: ([string, string] | [string, '->', string])[]): { path: string; sha: string } => {
    const path = join(dir, `${name}.tgz`);
    const py = [
      'import io, json, sys, tarfile',
      'with tarfile.open(sys.argv[1], "w:gz") as t:',
      '    for e in json.loads(sys.argv[2]):',
      '        i = tarfile.TarInfo(e[0])',
      '        if len(e) == 3:',
      '            i.type, i.linkname = tarfile.SYMTYPE, e[2]; t.addfile(i)',
      '        else:',
      '            b = e[1].encode(); i.size = len(b); t.addfile(i, io.BytesIO(b))',
    ].join('\n');
    expect(spawnSync('python3', ['-c', py, path, JSON.stringify(entries)]).status).toBe(0);
    return { path, sha: createHash('sha256').update(readFileSync(path)).digest('hex') };
  };

  it.each<[string, (outside: string) => ([string, string] | [string, '->', string])[], RegExp]>([
    [
      'a relative link out, then a file under it',
      () => [
        ['node_modules/.bin/esc', '->', '../../..'],
        ['node_modules/.bin/esc/OUT.txt', 'x'],
      ],
      /link that leads outside/,
    ],
    [
      'an absolute link out, then a file under it',
      (outside) => [
        ['node_modules/abs', '->', outside],
        ['node_modules/abs/OUT.txt', 'x'],
      ],
      /link that leads outside/,
    ],
    [
      'a link that leads out only through an earlier link of the archive',
      () => [
        ['node_modules/b', '->', '.'],
        ['node_modules/a', '->', 'b/x/../../..'],
        ['node_modules/a/OUT.txt', 'x'],
      ],
      /link that leads outside/,
    ],
    [
      'a link out named like a file that comes after it',
      (outside) => [
        ['node_modules/f', '->', join(outside, 'OUT.txt')],
        ['node_modules/f', 'x'],
      ],
      /link that leads outside/,
    ],
  ])('never writes outside the destination through a link: %s', (_, entries, why) => {
    const outside = join(dir, 'outside');
    mkdirSync(outside);
    const r = deliver(crafted('evil', entries(outside)), join(dir, 'ws'));
    expect(r.code).toBe(3);
    expect(r.err).toMatch(why);
    expect(readdirSync(outside)).toEqual([]);
    expect(existsSync(join(dir, 'OUT.txt'))).toBe(false);
    expect(existsSync(join(dir, 'ws/.packages/.incoming.tgz'))).toBe(false);
  });

  it.each([
    ['a folder', '', 'node_modules/p', 'node_modules/p/index.js'],
    ['a file', 'OUT.txt', 'node_modules/q.js', 'node_modules/q.js'],
  ])('never writes through a link sandbox code left in the destination: %s', (_, target, link, entry) => {
    const outside = join(dir, 'outside');
    mkdirSync(join(dir, 'ws/node_modules'), { recursive: true });
    mkdirSync(outside);
    symlinkSync(join(outside, target), join(dir, 'ws', link));
    const r = deliver(crafted('p', [[entry, 'x']]), join(dir, 'ws'));
    expect(r.code).toBe(3);
    expect(r.err).toMatch(/would be written outside/);
    expect(readdirSync(outside)).toEqual([]);
  });

  it("keeps links that stay inside, as npm's .bin links do", () => {
    const r = deliver(
      crafted('bin', [
        ['node_modules/p/cli.js', 'x'],
        ['node_modules/.bin/cli', '->', '../p/cli.js'],
      ]),
      join(dir, 'ws'),
    );
    expect(r.code, r.err).toBe(0);
    expect(readFileSync(join(dir, 'ws/node_modules/.bin/cli'), 'utf8')).toBe('x');
  });

  it('never deletes outside the destination, whatever a RECORD says', () => {
    const dest = join(dir, 'ws/.packages/python');
    writeFileSync(join(dir, 'precious'), 'x');
    deliver(archive('old', { 'Tab-0.9.dist-info/RECORD': '../../../precious,,\n/etc/hostname,,\n' }), dest);
    deliver(archive('new', { 'tab-1.0.dist-info/RECORD': '' }), dest);
    expect(existsSync(join(dir, 'precious'))).toBe(true);
  });
});
