// Writes the CRDs generated from src/api into crds/ (kubectl users) and the Helm chart's crds/
// (identical text, DO-NOT-EDIT header). `--check` (CI) only compares and exits 1 when a file on
// disk is missing or differs, so a schema change cannot ship without its CRDs.
import { readFile, writeFile, mkdir } from 'node:fs/promises';
import { dirname, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { renderCrdYaml } from '../src/api/v1alpha1/crd-yaml.js';
import { buildSandboxProfileCrd, buildSandboxRunCrd, buildSandboxSessionCrd, buildUpstreamServerCrd } from '../src/api/v1alpha1/index.js';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');

const CRD_DIRS = ['crds', 'charts/codemode-operator/crds'];
const outputs: Array<{ path: string; render: () => string }> = CRD_DIRS.flatMap((dir) => [
  { path: resolve(repoRoot, dir, 'codemode.dev_sandboxruns.yaml'), render: () => renderCrdYaml(buildSandboxRunCrd()) },
  { path: resolve(repoRoot, dir, 'codemode.dev_sandboxsessions.yaml'), render: () => renderCrdYaml(buildSandboxSessionCrd()) },
  { path: resolve(repoRoot, dir, 'codemode.dev_upstreamservers.yaml'), render: () => renderCrdYaml(buildUpstreamServerCrd()) },
  { path: resolve(repoRoot, dir, 'codemode.dev_sandboxprofiles.yaml'), render: () => renderCrdYaml(buildSandboxProfileCrd()) },
]);

async function readIfExists(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new Error(`Failed to read ${path}`, { cause: err });
  }
}

async function main(argv: string[]): Promise<number> {
  const check = argv.includes('--check');
  let stale = 0;
  for (const { path, render } of outputs) {
    const wanted = render();
    const onDisk = await readIfExists(path);
    const name = relative(repoRoot, path);
    if (onDisk === wanted) {
      console.log(`${name} is up to date`);
      continue;
    }
    if (check) {
      stale++;
      const what = onDisk === undefined ? 'is missing' : 'differs from what src/api generates';
      console.error(`${name} ${what}. Run \`npm run gen:crds\` and commit the result.`);
      continue;
    }
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, wanted);
    console.log(`Wrote ${name}`);
  }
  return stale === 0 ? 0 : 1;
}

process.exitCode = await main(process.argv.slice(2));
