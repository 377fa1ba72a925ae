// The Dockerfiles and the builder CI uses (test/cluster/images/build.sh) must describe the same
// images: same Debian suite, packages, user, workdir, env, entrypoint/command, and for the
// gateway the same Node version. Both sides are parsed; neither is copied here.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { SANDBOX_PASSWD_PATH } from '../../../src/sandbox/pod.js';
import { aptPackages, instructions, parseBuilder, parseDockerfile, shellAssignments } from './parse.js';

const builder = readFileSync('test/cluster/images/build.sh', 'utf8');
const lock = JSON.parse(readFileSync('package-lock.json', 'utf8')) as { packages: Record<string, { version: string }> };

describe.each([
  { name: 'gateway' as const, dockerfile: 'Dockerfile' },
  { name: 'sandbox' as const, dockerfile: 'images/sandbox/Dockerfile' },
])('$dockerfile and build.sh $name', ({ name, dockerfile }) => {
  const docker = parseDockerfile(readFileSync(dockerfile, 'utf8'));
  const built = parseBuilder(builder, name);

  it('use the same Debian suite and packages', () => {
    expect(docker.final.suite).toBe(built.suite);
    expect(docker.final.packages).toEqual(built.packages);
  });

  it('run as the same non-root user in the same workdir with the same env', () => {
    expect(docker.final.user).toBe(built.user);
    expect(docker.final.user).not.toMatch(/^(0|root)(:|$)/);
    expect(docker.final.workdir).toBe(built.workdir);
    expect([...docker.final.env].sort()).toEqual([...built.env].sort());
  });

  it('start the same process', () => {
    expect(docker.final.entrypoint).toEqual(built.entrypoint);
    expect(docker.final.cmd).toEqual(built.cmd);
  });
});

// A sandbox pod's user is its own (sandboxUid) and in no /etc/passwd: the container's command
// writes its line to SANDBOX_PASSWD_PATH, which the images read through libnss-extrausers.
describe.each([['images/sandbox/Dockerfile'], ['images/datascience/Dockerfile'], ['test/cluster/images/build.sh']])(
  '%s: the sandbox user is looked up',
  (file) => {
    const text = readFileSync(file, 'utf8');
    it.each([
      ['links libnss-extrausers passwd file to the one the pod writes', `ln -sfn ${SANDBOX_PASSWD_PATH} `],
      ['lists extrausers for passwd in nsswitch.conf', `sed -i 's/^passwd:.*$/& extrausers/' `],
      ['installs libnss-extrausers', 'libnss-extrausers'],
    ])('%s', (_, line) => {
      expect(text).toContain(line);
    });
  },
);

describe('gateway Node', () => {
  const docker = parseDockerfile(readFileSync('Dockerfile', 'utf8'));
  it('is the version the builder ships (npm `node` package in package-lock.json), 22 or later', () => {
    expect(builder).toContain('node_modules/node/bin/node');
    const shipped = lock.packages['node_modules/node']?.version;
    expect(docker.args.NODE_VERSION).toBe(shipped);
    expect(Number(shipped?.split('.')[0])).toBeGreaterThanOrEqual(22);
    expect(docker.stages.filter((s) => s.image.startsWith('node:')).map((s) => s.image)).toEqual([
      `node:${shipped}-${docker.final.suite}-slim`,
      `node:${shipped}-${docker.final.suite}-slim`,
    ]);
  });

  it('installs only production dependencies into the final image', () => {
    const deps = instructions(readFileSync('Dockerfile', 'utf8')).filter((i) => i.op === 'RUN' && i.rest.includes('npm ci'));
    expect(deps.some((i) => i.rest.includes('--omit=dev'))).toBe(true);
    expect(readFileSync('Dockerfile', 'utf8')).toMatch(/COPY --from=deps .*\/node_modules \/app\/node_modules/);
  });
});

describe('parsers', () => {
  it.each([
    ['apt-get install -y --no-install-recommends a b && rm -rf x', ['a', 'b']],
    ['apt-get update && apt-get install -y c; apt-get install d', ['c', 'd']],
    ['echo none', []],
  ])('aptPackages(%j)', (run, want) => {
    expect(aptPackages(run)).toEqual(want);
  });

  it.each([
    ['SUITE=bookworm\n', { SUITE: 'bookworm' }],
    ['PKGS=(a b  c)\n', { PKGS: ['a', 'b', 'c'] }],
    ['P="x=y z"\n', { P: 'x=y z' }],
    ['local_var=1\nA="$B"\n', {}],
  ])('shellAssignments(%j)', (script, want) => {
    expect(shellAssignments(script)).toEqual(want);
  });

  it('reads a multi-stage Dockerfile with ARGs, continuations and comments', () => {
    const d = parseDockerfile(
      'ARG V=1\nFROM node:${V} AS b\nUSER 1\nFROM debian:trixie-slim\n# c\nRUN apt-get install -y \\\n  x y\nUSER 2:2\nCMD ["a", "b"]\n',
    );
    expect(d.stages).toEqual([{ image: 'node:1', name: 'b' }, { image: 'debian:trixie-slim' }]);
    expect(d.final).toMatchObject({ suite: 'trixie', packages: ['x', 'y'], user: '2:2', cmd: ['a', 'b'], entrypoint: [] });
  });
});
