// The data-science image: its Dockerfile and the builder CI uses (build.sh datascience) describe
// the same image (suite, apt packages, user, env, command, the same pinned wheels with the same
// pip flags), and every wheel is pinned by version and hash.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseBuilder, parseDockerfile } from './parse.js';

const builder = readFileSync('test/cluster/images/build.sh', 'utf8');
const dockerText = readFileSync('images/datascience/Dockerfile', 'utf8');
const requirements = readFileSync('images/datascience/requirements.txt', 'utf8');
const pins = requirements.split('\n').filter((l) => l !== '' && !l.startsWith('#'));

describe('images/datascience/Dockerfile and build.sh datascience', () => {
  const docker = parseDockerfile(dockerText);
  const built = parseBuilder(builder, 'datascience');

  it('use the same Debian suite, packages, user, workdir, env and command', () => {
    expect(docker.final.suite).toBe(built.suite);
    expect(docker.final.packages).toEqual(built.packages);
    expect(docker.final.user).toBe(built.user);
    expect(docker.final.workdir).toBe(built.workdir);
    expect([...docker.final.env].sort()).toEqual([...built.env].sort());
    expect(docker.final.cmd).toEqual(built.cmd);
    expect(built.env).toEqual(expect.arrayContaining(['MPLCONFIGDIR=/tmp/matplotlib', 'MPLBACKEND=Agg']));
  });

  it.each([
    ['--require-hashes'],
    ['--only-binary=:all:'],
    ['--python-version 3.11'],
    ['--abi cp311'],
    ['--platform manylinux2014_x86_64'],
    ['seq 36 -1 17'],
    ['--no-compile'],
  ])('both install the wheels with %s', (flag) => {
    expect(dockerText).toContain(flag);
    expect(builder.slice(builder.indexOf('# ---- datascience'))).toContain(flag);
  });

  it('pins every wheel by version and sha256, with the stack the README lists', () => {
    expect(pins.length).toBeGreaterThan(10);
    for (const line of pins) expect(line).toMatch(/^[a-z0-9-]+==[0-9][^ ]* --hash=sha256:[0-9a-f]{64}$/);
    const names = pins.map((l) => l.split('==')[0]);
    expect(names).toEqual(expect.arrayContaining(['numpy', 'pandas', 'scipy', 'matplotlib', 'scikit-learn', 'sympy', 'seaborn', 'openpyxl']));
    expect(names).not.toContain('pip');
  });
});
