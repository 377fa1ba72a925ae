// The pure decisions of an install: requirement syntax, the allow and deny lists (names and
// versions, dependencies included), and reading what the fetcher pod printed as untrusted input.
import { describe, expect, it } from 'vitest';
import { NPM_REQUIREMENT, POLICY_ENTRY, PYPI_REQUIREMENT, PackagePolicySchema } from '../../../src/api/v1alpha1/index.js';
import {
  MAX_PACKAGE_MESSAGE,
  PackageError,
  checkRequested,
  checkResolved,
  ecosystemOf,
  packageMessage,
  packagePolicy,
  parseFetchSummary,
  parseNpmLock,
  parsePipReport,
  requirementName,
  type PackagePolicy,
} from '../../../src/packages/policy.js';

const base: PackagePolicy = { ecosystems: ['pypi', 'npm'], allow: [], deny: [], maxPackageBytes: 1000, maxTotalBytes: 5000 };
const policy = (p: Partial<PackagePolicy>): PackagePolicy => ({ ...base, ...p });

function refusal(f: () => unknown): { message: string; kind: string } | undefined {
  try {
    f();
    return undefined;
  } catch (err) {
    if (err instanceof PackageError) return { message: `${err.message} ${err.hint}`, kind: err.kind };
    throw err;
  }
}

describe('requirement syntax', () => {
  it.each<[string, boolean]>([
    ['tabulate', true],
    ['tabulate==0.9.0', true],
    ['Tabulate_X.y>=1.0,<2', true],
    ['requests[socks]>=2', true],
    ['pkg ~= 1.4', true],
    ['python-dateutil==2.9.0.post0', true],
    ['-r requirements.txt', false],
    ['--index-url=http://evil', false],
    ['pkg @ https://x/y.whl', false],
    ['git+https://github.com/a/b', false],
    ['./local/dir', false],
    ['pkg; python_version<"3.8"', false],
    ['', false],
  ])('PyPI %j → %s', (req, ok) => expect(PYPI_REQUIREMENT.test(req)).toBe(ok));

  it.each<[string, boolean]>([
    ['is-number', true],
    ['is-number@7.0.0', true],
    ['is-number@^7', true],
    ['@types/node@22', true],
    ['left-pad@latest', true],
    ['file:../x', false],
    ['git+ssh://x', false],
    ['https://evil/x.tgz', false],
    ['user/repo', false],
    ['--registry=http://evil', false],
    ['@scope', false],
    ['JSONStream@1.3.5', true],
    ['@Scope/p', false],
  ])('npm %j → %s', (req, ok) => expect(NPM_REQUIREMENT.test(req)).toBe(ok));

  it.each<[string, boolean]>([
    ['pypi:six', true],
    ['pypi:six==1.17.0', true],
    ['npm:is-number', true],
    ['npm:@types/node@22.0.0', true],
    ['six', false],
    ['pypi:six>=1', false],
    ['cargo:serde', false],
    ['npm:JSONStream', true],
    ['npm:JSONStream@1.3.5', true],
  ])('policy entry %j → %s', (e, ok) => expect(POLICY_ENTRY.test(e)).toBe(ok));

  it.each<[string, 'pypi' | 'npm', string]>([
    ['Tabulate_X.y>=1.0', 'pypi', 'tabulate-x-y'],
    ['requests[socks]', 'pypi', 'requests'],
    ['@types/node@22', 'npm', '@types/node'],
    ['is-number@7.0.0', 'npm', 'is-number'],
    ['is-number', 'npm', 'is-number'],
  ])('the name in %j (%s) is %s', (req, eco, name) => expect(requirementName(eco, req)).toBe(name));

  it.each([
    ['python', 'pypi'],
    ['node', 'npm'],
    ['bash', undefined],
  ] as const)('a %s session installs from %s', (lang, eco) => expect(ecosystemOf(lang)).toBe(eco));
});

describe('checkRequested', () => {
  it.each<[string, Partial<PackagePolicy>, 'python' | 'node' | 'bash', string[], RegExp | undefined]>([
    ['anything, with no lists', {}, 'python', ['tabulate'], undefined],
    ['a denied name', { deny: ['pypi:six'] }, 'python', ['Six>=1'], /six may not be installed: the profile's deny list has pypi:six/],
    ['a name with only one version denied (the resolution may pick another)', { deny: ['pypi:six==1.16.0'] }, 'python', ['six'], undefined],
    ['a name outside the allow list', { allow: ['pypi:tabulate'] }, 'python', ['six'], /six may not be installed: it is not in the profile's allow list/],
    ['a name on the allow list', { allow: ['pypi:tabulate==0.9.0'] }, 'python', ['tabulate==0.9.0'], undefined],
    ['npm in a profile without it', { ecosystems: ['pypi'] }, 'node', ['is-number'], /does not allow installing npm packages/],
    ['any install when no registry is allowed', { ecosystems: [] }, 'python', ['six'], /does not allow installing PyPI packages/],
    ['a bash session', {}, 'bash', ['six'], /A bash session cannot install packages/],
    ['an npm spec in a python session', {}, 'python', ['@types/node@22'], /is not a PyPI requirement/],
    ['a URL', {}, 'node', ['https://evil/x.tgz'], /is not a npm requirement/],
    ['a deny entry of the other registry', { deny: ['npm:six'] }, 'python', ['six'], undefined],
    ['an npm name with capitals, denied as it is spelled', { deny: ['npm:JSONStream'] }, 'node', ['JSONStream@1'], /JSONStream may not be installed/],
    ['an npm name with capitals is not the lowercase one (two packages)', { deny: ['npm:jsonstream'] }, 'node', ['JSONStream'], undefined],
  ])('%s', (_, p, lang, reqs, expected) => {
    const r = refusal(() => checkRequested(policy(p), ecosystemOf(lang), lang, reqs));
    if (expected === undefined) expect(r).toBeUndefined();
    else expect(r?.message).toMatch(expected);
  });

  it('deduplicates', () => expect(checkRequested(base, 'pypi', 'python', ['six', 'six'])).toEqual(['six']));
});

describe('checkResolved (dependencies included)', () => {
  const resolved = [
    { name: 'python-dateutil', version: '2.9.0.post0' },
    { name: 'six', version: '1.17.0' },
  ];
  it.each<[string, Partial<PackagePolicy>, RegExp | undefined]>([
    ['no lists', {}, undefined],
    ['a denied dependency', { deny: ['pypi:six'] }, /six 1\.17\.0 may not be installed \(needed by what you asked for\): the profile's deny list has pypi:six/],
    ['a denied version of a dependency', { deny: ['pypi:six==1.17.0'] }, /six 1\.17\.0 may not be installed/],
    ['another version denied', { deny: ['pypi:six==1.16.0'] }, undefined],
    ['an allow list without the dependency', { allow: ['pypi:python-dateutil'] }, /six 1\.17\.0 may not be installed .*not in the profile's allow list/],
    ['an allow list with both', { allow: ['pypi:python-dateutil', 'pypi:six==1.17.0'] }, undefined],
    ['an allow list with the wrong version', { allow: ['pypi:python-dateutil', 'pypi:six==1.16.0'] }, /six 1\.17\.0/],
  ])('%s', (_, p, expected) => {
    const r = refusal(() => checkResolved(policy(p), 'pypi', resolved));
    if (expected === undefined) expect(r).toBeUndefined();
    else expect(r?.message).toMatch(expected);
  });
});

describe('packagePolicy', () => {
  const d = {
    packagesEcosystems: ['pypi' as const],
    packagesAllow: ['pypi:a'],
    packagesDeny: ['pypi:b'],
    packagesMaxPackageBytes: 10,
    packagesMaxTotalBytes: 20,
  };
  it.each([
    ['no spec: the gateway settings', undefined, { ecosystems: ['pypi'], allow: ['pypi:a'], deny: ['pypi:b'], maxPackageBytes: 10, maxTotalBytes: 20 }],
    [
      'a spec field each replaces the setting',
      { deny: [], maxTotalBytes: 99 },
      { ecosystems: ['pypi'], allow: ['pypi:a'], deny: [], maxPackageBytes: 10, maxTotalBytes: 99 },
    ],
  ])('%s', (_, spec, want) => expect(packagePolicy(spec ? PackagePolicySchema.parse(spec) : undefined, d)).toEqual(want));
});

const wheel = (name: string, version: string, url = `https://files.example/${name}-${version}-py3-none-any.whl`, sha = 'a'.repeat(64)) => ({
  metadata: { name, version },
  download_info: { url, archive_info: { hashes: { sha256: sha } } },
});

describe('parsePipReport', () => {
  it('reads the packages to install, names normalised, each pinned to its wheel hash', () => {
    expect(parsePipReport(JSON.stringify({ version: '1', install: [wheel('Python_Dateutil', '2.9.0.post0'), wheel('six', '1.17.0')] }))).toEqual([
      { name: 'python-dateutil', version: '2.9.0.post0', sha256: 'a'.repeat(64) },
      { name: 'six', version: '1.17.0', sha256: 'a'.repeat(64) },
    ]);
  });
  it.each<[string, string, RegExp]>([
    ['not JSON', '{', /unreadable installation report/],
    ['a source distribution', JSON.stringify({ install: [wheel('x', '1', 'https://f/x-1.tar.gz')] }), /x 1 has no wheel/],
    [
      'a wheel without a hash',
      JSON.stringify({ install: [{ metadata: { name: 'x', version: '1' }, download_info: { url: 'https://f/x.whl' } }] }),
      /has no wheel with a sha256/,
    ],
    ['a forged name', JSON.stringify({ install: [wheel('x; rm -rf /', '1')] }), /cannot read/],
    ['a forged version', JSON.stringify({ install: [wheel('x', '1 --index-url http://evil')] }), /cannot read/],
    ['too many packages', JSON.stringify({ install: Array.from({ length: 301 }, (_, i) => wheel(`p${i}`, '1')) }), /more than 300 packages/],
    // The fetch step writes each name into a requirements file: a '/' makes it a path, an '@' a URL.
    ['a name that is a path', JSON.stringify({ install: [wheel('a/../../tmp/fetch', '1')] }), /cannot read/],
    ['a name with a URL', JSON.stringify({ install: [wheel('x@..', '1')] }), /cannot read/],
    ['a scoped (npm) name', JSON.stringify({ install: [wheel('@s/x', '1')] }), /cannot read/],
    ['a name with ~', JSON.stringify({ install: [wheel('x~y', '1')] }), /cannot read/],
    ['a name ending in -', JSON.stringify({ install: [wheel('x-', '1')] }), /cannot read/],
  ])('refuses %s', (_, text, expected) => expect(refusal(() => parsePipReport(text))?.message).toMatch(expected));
  it('counts the packages before reading each one (zod would keep an issue per bad element)', () => {
    expect(refusal(() => parsePipReport(JSON.stringify({ install: Array.from({ length: 100_000 }, () => 1) })))).toEqual({
      message: expect.stringMatching(/more than 300 packages in all/),
      kind: 'refused',
    });
  });
});

describe('parseNpmLock', () => {
  const registry = 'https://registry.example/';
  const entry = (v: string, extra: Record<string, unknown> = {}, name = 'x') => ({
    version: v,
    resolved: `https://registry.example/${name}/-/${name.replace(/^@.*\//, '')}-${v}.tgz`,
    integrity: 'sha512-abc',
    ...extra,
  });
  it('reads every package under node_modules, nested ones by their own name', () => {
    const lock = {
      packages: {
        '': { name: 'root' },
        'node_modules/is-odd': entry('3.0.1', {}, 'is-odd'),
        'node_modules/is-odd/node_modules/is-number': entry('6.0.0', {}, 'is-number'),
        'node_modules/@s/p': entry('1.0.0', { resolved: 'https://registry.example/@s%2fp/-/p-1.0.0.tgz' }, '@s/p'),
        'node_modules/no-resolved': entry('2.0.0', { resolved: undefined }),
      },
    };
    expect(parseNpmLock(JSON.stringify(lock), registry)).toEqual([
      { name: 'is-odd', version: '3.0.1' },
      { name: 'is-number', version: '6.0.0' },
      { name: '@s/p', version: '1.0.0' },
      { name: 'no-resolved', version: '2.0.0' },
    ]);
  });
  it.each<[string, Record<string, unknown>, RegExp]>([
    ['a tarball from elsewhere', entry('1', { resolved: 'https://evil.example/x.tgz' }), /does not come from the registry/],
    ['no integrity', entry('1', { integrity: undefined }), /does not come from the registry/],
    ['a sha1 integrity', entry('1', { integrity: 'sha1-abc' }), /does not come from the registry/],
    ['a link', entry('1', { link: true }), /does not come from the registry/],
    ['a forged version', entry('1 && curl'), /cannot read/],
    ['a forged alias name', entry('1', { name: '../../x' }), /cannot read/],
    // A dependency's npm-shrinkwrap.json decides `resolved`: it must be the tarball of this name and version.
    [
      'another package’s tarball',
      entry('1', { resolved: 'https://registry.example/evil/-/evil-1.tgz' }),
      /x 1 would be fetched from .*evil-1\.tgz, which is not/,
    ],
    ['another version’s tarball', entry('1', { resolved: 'https://registry.example/x/-/x-2.tgz' }), /not the registry's tarball of x 1/],
    ['a tarball named like it elsewhere on the host', entry('1', { resolved: 'https://registry.example/evil/-/x-1.tgz' }), /not the registry's tarball/],
    ['a query that names it', entry('1', { resolved: 'https://registry.example/evil/-/evil-1.tgz?/x/-/x-1.tgz' }), /not the registry's tarball/],
    ['an encoded query that names it', entry('1', { resolved: 'https://registry.example/evil/-/evil-1.tgz%3F/x/-/x-1.tgz' }), /not the registry's tarball/],
    ['its tarball under another path of the host', entry('1', { resolved: 'https://registry.example/other-repo/x/-/x-1.tgz' }), /not the registry's tarball/],
  ])('refuses %s', (_, e, expected) =>
    expect(refusal(() => parseNpmLock(JSON.stringify({ packages: { 'node_modules/x': e } }), registry))?.message).toMatch(expected),
  );
  it.each<[string, string, string]>([
    ['a mirror under a path', 'https://nexus.example/repository/npm/', 'https://nexus.example/repository/npm/@s/p/-/p-1.0.0.tgz'],
    ['a mirror given without the last slash', 'https://nexus.example/repository/npm', 'https://nexus.example/repository/npm/@s/p/-/p-1.0.0.tgz'],
    ['a scope encoded %2F', 'https://registry.example/', 'https://registry.example/@s%2Fp/-/p-1.0.0.tgz'],
  ])("takes the registry's tarball of the package from %s", (_, reg, resolved) =>
    expect(parseNpmLock(JSON.stringify({ packages: { 'node_modules/@s/p': entry('1.0.0', { resolved }) } }), reg)).toEqual([
      { name: '@s/p', version: '1.0.0' },
    ]),
  );
  // "lodash": "npm:evil@1.0.0" installs evil in node_modules/lodash; npm's lockfile says so in `name`.
  it.each<[string, Partial<PackagePolicy>, RegExp]>([
    ['denied by its own name', { deny: ['npm:evil'] }, /evil 1\.0\.0 may not be installed .*deny list has npm:evil/],
    ['denied by its own name and version', { deny: ['npm:evil@1.0.0'] }, /evil 1\.0\.0 may not be installed/],
    ['not allowed under the name it is aliased to', { allow: ['npm:lodash'] }, /evil 1\.0\.0 may not be installed .*not in the profile's allow list/],
  ])('checks an aliased package by what it is: %s', (_, p, expected) => {
    const lock = { packages: { 'node_modules/lodash': entry('1.0.0', { name: 'evil', resolved: 'https://registry.example/evil/-/evil-1.0.0.tgz' }) } };
    const resolved = parseNpmLock(JSON.stringify(lock), registry);
    expect(resolved).toEqual([{ name: 'evil', version: '1.0.0' }]);
    expect(refusal(() => checkResolved(policy(p), 'npm', resolved))?.message).toMatch(expected);
  });
  it.each<[string, string, unknown]>([
    ['bad values', 'node_modules/p', 1],
    ['empty objects outside node_modules', 'w/p', {}],
    ['valid packages', 'node_modules/p', entry('1.0.0')],
  ])('counts the entries before reading each one: 100000 %s', (_, key, value) => {
    const packages = Object.fromEntries(Array.from({ length: 100_000 }, (_, i) => [`${key}${i}`, value]));
    expect(refusal(() => parseNpmLock(JSON.stringify({ packages }), registry))).toEqual({
      message: expect.stringMatching(/more than 300 packages in all/),
      kind: 'refused',
    });
  });
});

describe('packageMessage (what a package error says, much of it quoting the fetcher)', () => {
  it.each([
    ['plain text', 'tabulate 0.9.0 is denied.', 'tabulate 0.9.0 is denied.'],
    [
      'credentials in an index URL',
      'could not fetch https://alice:S3cr3t@nexus.example/simple/pip/: 401',
      'could not fetch https://nexus.example/simple/pip/: 401',
    ],
    ['a user name alone', 'GET http://ci-bot@registry.example/x', 'GET http://registry.example/x'],
    ["pip's masked form", 'https://alice:****@nexus.example/simple', 'https://nexus.example/simple'],
    ['an @ after the host is kept', 'see https://registry.example/@scope/pkg and me@example.com', 'see https://registry.example/@scope/pkg and me@example.com'],
    ['control characters', 'a\nb\r\u001b[2Jc\u0085d', 'a b  [2Jc d'],
  ])('%s', (_, text, expected) => {
    expect(packageMessage(text)).toBe(expected);
  });

  it(`is at most ${MAX_PACKAGE_MESSAGE} units, and a PackageError's message is one`, () => {
    expect(packageMessage('x'.repeat(5000))).toHaveLength(MAX_PACKAGE_MESSAGE);
    expect(new PackageError('https://u:p@h/ \u001b'.padEnd(3000, 'y'), 'hint', 'failed').message).toBe(
      packageMessage('https://u:p@h/ \u001b'.padEnd(3000, 'y')),
    );
  });
});

describe('parseFetchSummary (the limits, checked again by the gateway)', () => {
  const sum = (bytes: number[], archive: number, unpacked = archive, file = (i: number) => `p${i}.whl`) =>
    JSON.stringify({ packages: bytes.map((b, i) => ({ file: file(i), bytes: b })), unpackedBytes: unpacked, archiveBytes: archive, sha256: 'b'.repeat(64) });
  it.each<[string, string, RegExp | undefined, string | undefined]>([
    ['within both limits', sum([1000, 10], 4000), undefined, undefined],
    ['a package above the per-package limit', sum([1001], 100), /p0\.whl is 1001 bytes; the largest package allowed is 1000 bytes/, 'refused'],
    ['an archive above the total', sum([10], 5001, 10), /take 5001 bytes; one install may deliver at most 5000/, 'refused'],
    ['a small archive that unpacks above the total', sum([10], 100, 5001), /take 5001 bytes unpacked; one install may deliver at most 5000/, 'refused'],
    ['no unpacked size', JSON.stringify({ packages: [], archiveBytes: 1, sha256: 'b'.repeat(64) }), /cannot read/, 'failed'],
    [
      'a file name with escape sequences and newlines, 4096 long',
      sum([1001], 100, 100, () => `a.whl\n\u001b[2J${'x'.repeat(4080)}`),
      /^a\.whl {2}\[2Jx{189}… is 1001 bytes/,
      'refused',
    ],
    ['a missing hash', JSON.stringify({ packages: [], archiveBytes: 1, unpackedBytes: 1 }), /cannot read/, 'failed'],
    ['a negative size', sum([-1], 10), /cannot read/, 'failed'],
  ])('%s', (_, text, expected, kind) => {
    const r = refusal(() => parseFetchSummary(text, base));
    if (expected === undefined) expect(r).toBeUndefined();
    else expect(r).toMatchObject({ message: expect.stringMatching(expected), kind });
  });
});
