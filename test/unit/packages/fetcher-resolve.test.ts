// The fetcher's `resolve` and `fetch` run here against stand-ins for pip and npm (a temporary
// directory in place of /tmp/fetch): resolve prints only the fields the gateway reads, compact, so
// a report that carries every package's README stays far below MAX_RESOLVE_BYTES and still
// parses; fetch holds what lands in the session, unpacked, to the install's byte limit.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MAX_RESOLVE_BYTES, withIndex } from '../../../src/packages/installer.js';
import { parseFetchSummary, parseNpmLock, parsePipReport } from '../../../src/packages/policy.js';
import { FETCHER_SCRIPT } from '../../../src/packages/scripts.js';

/** The index, given on stdin's first line as the installer gives it (never an argument). */
const INDEX = 'https://index.example/simple';
let w: string;
beforeEach(() => {
  w = mkdtempSync(join(tmpdir(), 'fetch-'));
});
afterEach(() => rmSync(w, { recursive: true, force: true }));

/** Runs `resolve` with a pip (a directory run as pip.whl/pip) and an npm that write `answer` where the real ones would. */
function resolve(eco: 'pypi' | 'npm', answer: unknown): { code: number | null; out: string; err: string } {
  const file = join(w, 'answer.json');
  writeFileSync(file, JSON.stringify(answer));
  mkdirSync(join(w, 'pip.whl/pip'), { recursive: true });
  writeFileSync(
    join(w, 'pip.whl/pip/__main__.py'),
    `import shutil, sys\nassert sys.argv[sys.argv.index("--index-url") + 1] == ${JSON.stringify(INDEX)}\nshutil.copy(${JSON.stringify(file)}, sys.argv[sys.argv.index("--report") + 1])\n`,
  );
  mkdirSync(join(w, 'npm/package/bin'), { recursive: true });
  mkdirSync(join(w, 'n'), { recursive: true });
  writeFileSync(join(w, 'npm/package/bin/npm-cli.js'), `require('fs').copyFileSync(${JSON.stringify(file)}, 'package-lock.json');\n`);
  const script = FETCHER_SCRIPT.replace('W = "/tmp/fetch"', `W = ${JSON.stringify(w)}`);
  const r = spawnSync('python3', ['-I', '-c', script, 'resolve', eco, 'x'], { input: withIndex(INDEX), timeout: 20_000, maxBuffer: 64 << 20 });
  return { code: r.status, out: r.stdout.toString(), err: r.stderr.toString() };
}

const readme = 'r'.repeat(100_000);

describe("the fetcher's resolve prints only what the gateway reads", () => {
  it('pip: 300 packages, each with a 100 kB README, fit and parse', () => {
    const wheel = (i: number) => ({
      metadata: { name: `P_${i}`, version: '1.0', description: readme, requires_dist: ['a', 'b'] },
      download_info: { url: `https://f/p_${i}-1.0-py3-none-any.whl`, archive_info: { hash: 'sha256=x', hashes: { sha256: 'a'.repeat(64), md5: 'b' } } },
      is_direct: false,
      requested: true,
    });
    const r = resolve('pypi', { version: '1', pip_version: '26.3', install: Array.from({ length: 300 }, (_, i) => wheel(i)), environment: { a: 'b' } });
    expect(r.code, r.err).toBe(0);
    expect(r.out.length).toBeLessThan(MAX_RESOLVE_BYTES);
    expect(r.out).not.toContain(readme.slice(0, 100));
    const parsed = parsePipReport(r.out);
    expect(parsed).toHaveLength(300);
    expect(parsed[7]).toEqual({ name: 'p-7', version: '1.0', sha256: 'a'.repeat(64) });
  });

  it.each<[string, Record<string, unknown>, RegExp]>([
    ['a source distribution', { url: 'https://f/x-1.tar.gz', archive_info: { hashes: { sha256: 'a'.repeat(64) } } }, /has no wheel/],
    ['no archive_info', { url: 'https://f/x-1.0-py3-none-any.whl' }, /has no wheel/],
    ['archive_info without hashes', { url: 'https://f/x-1.0-py3-none-any.whl', archive_info: {} }, /cannot read/],
  ])('pip: %s is still refused by the gateway', (_, downloadInfo, expected) => {
    const r = resolve('pypi', { install: [{ metadata: { name: 'x', version: '1.0' }, download_info: downloadInfo }] });
    expect(r.code, r.err).toBe(0);
    expect(() => parsePipReport(r.out)).toThrow(expected);
  });

  it('npm: keeps name (aliases), version, resolved, integrity and link; drops the rest', () => {
    const entry = {
      version: '1.0.0',
      resolved: 'https://registry.example/evil/-/evil-1.0.0.tgz',
      integrity: 'sha512-b',
      license: 'MIT',
      engines: { node: '*' },
    };
    const r = resolve('npm', {
      name: 'codemode-fetch',
      lockfileVersion: 3,
      packages: {
        '': { name: 'codemode-fetch', dependencies: { lodash: 'npm:evil@1.0.0' } },
        'node_modules/lodash': { ...entry, name: 'evil', funding: readme },
      },
    });
    expect(r.code, r.err).toBe(0);
    expect(JSON.parse(r.out)).toEqual({
      packages: { '': { name: 'codemode-fetch' }, 'node_modules/lodash': { name: 'evil', version: '1.0.0', resolved: entry.resolved, integrity: 'sha512-b' } },
    });
    expect(parseNpmLock(r.out, 'https://registry.example/')).toEqual([{ name: 'evil', version: '1.0.0' }]);
  });
});

describe("the fetcher's fetch counts what the packages take unpacked", () => {
  /** Runs `fetch` for PyPI with a pip that downloads a 100-byte wheel which unpacks to `unpacked` bytes. */
  function fetch(unpacked: number, maxAll: number): { code: number | null; out: string; err: string } {
    mkdirSync(join(w, 'pip.whl/pip'), { recursive: true });
    writeFileSync(
      join(w, 'pip.whl/pip/__main__.py'),
      [
        'import os, sys',
        'a = sys.argv',
        'if a[1] == "download":',
        '    d = a[a.index("-d") + 1]; os.makedirs(d, exist_ok=True)',
        '    open(os.path.join(d, "big-1.0-py3-none-any.whl"), "wb").write(b"w" * 100)',
        'elif a[1] == "install":',
        '    t = a[a.index("--target") + 1]; os.makedirs(t + "/big", exist_ok=True)',
        `    open(t + "/big/data.bin", "wb").write(os.urandom(${String(unpacked)}))`,
      ].join('\n'),
    );
    const script = FETCHER_SCRIPT.replace('W = "/tmp/fetch"', `W = ${JSON.stringify(w)}`);
    const pins = JSON.stringify([{ name: 'big', version: '1.0', sha256: 'a'.repeat(64) }]);
    const r = spawnSync('python3', ['-I', '-c', script, 'fetch', 'pypi', String(maxAll), String(maxAll)], {
      input: withIndex(INDEX, Buffer.from(pins)),
      timeout: 20_000,
    });
    return { code: r.status, out: r.stdout.toString(), err: r.stderr.toString() };
  }

  it('refuses a wheel within the limit that unpacks beyond it (exit 5: a limit)', () => {
    const r = fetch(200_000, 100_000);
    expect(r.code).toBe(5);
    expect(r.err).toMatch(/the packages take 200000 bytes unpacked; the limit is 100000/);
  });

  it('reports the unpacked bytes, which the gateway checks again', () => {
    const r = fetch(50_000, 100_000);
    expect(r.code, r.err).toBe(0);
    const policy = { ecosystems: ['pypi' as const], allow: [], deny: [], maxPackageBytes: 100_000, maxTotalBytes: 100_000 };
    expect(parseFetchSummary(r.out, policy)).toMatchObject({ unpackedBytes: 50_000, packages: [{ file: 'big-1.0-py3-none-any.whl', bytes: 100 }] });
    expect(() => parseFetchSummary(r.out, { ...policy, maxTotalBytes: 49_999 })).toThrow(/take 50000 bytes unpacked/);
  });
});
