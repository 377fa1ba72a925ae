// An earlier release of this repository, checked out beside this one, so a fault test can run its
// gateway next to this checkout's (a rolling upgrade between two gateway codes). The checkout is
// `git archive` of the commit, kept under the cache (it never changes for one commit); it uses this
// checkout's node_modules when both lock files are the same, and its own `npm ci` otherwise.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { CACHE_DIR } from '../../../../scripts/cluster-paths.js';

const run = promisify(execFile);
const REPO = fileURLToPath(new URL('../../../../', import.meta.url));

/**
 * The release an upgrade starts from: the last commit that landed (stop 72). Move it forward when a
 * later one lands, so the test keeps covering the upgrade users make.
 */
export const PREVIOUS_RELEASE = '390b5e1c8cb4d237dfdb01d4de5f5fb4b2f2be06';

/** The directory of `commit`'s checkout, made on first use, with its dependencies. */
export async function releaseCheckout(commit: string): Promise<string> {
  const dir = join(CACHE_DIR, 'releases', commit);
  if (!existsSync(join(dir, '.complete'))) {
    await run('git', ['cat-file', '-e', `${commit}^{commit}`], { cwd: REPO }).catch(() => {
      throw new Error(`Commit ${commit} (the previous release) is not in this clone: fetch the full history (git fetch --unshallow).`);
    });
    const staging = `${dir}.partial`;
    await rm(staging, { recursive: true, force: true });
    await mkdir(staging, { recursive: true });
    await run('bash', ['-c', `git archive ${commit} | tar -x -C "${staging}"`], { cwd: REPO });
    await writeFile(join(staging, '.complete'), '');
    await rm(dir, { recursive: true, force: true });
    await rename(staging, dir);
  }
  // Dependencies: this checkout's when the lock files agree (linked anew each time: the cache
  // outlives the clone it was made from), else the release's own, installed once.
  const modules = join(dir, 'node_modules');
  const sameLock = (await readFile(join(dir, 'package-lock.json'), 'utf8')) === (await readFile(join(REPO, 'package-lock.json'), 'utf8'));
  if (sameLock) {
    await rm(modules, { recursive: true, force: true });
    await symlink(join(REPO, 'node_modules'), modules);
  } else if (!existsSync(join(dir, '.installed'))) {
    await rm(modules, { recursive: true, force: true });
    await run('npm', ['ci', '--no-audit', '--no-fund'], { cwd: dir, maxBuffer: 64 * 1024 * 1024 });
    await writeFile(join(dir, '.installed'), '');
  }
  return dir;
}
