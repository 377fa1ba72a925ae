// The gateway loads client-node without its index of every API group (src/kube/slim-load.ts,
// api-client.ts): the redirect covers exactly config.js's import, the stand-in exports every name
// config.js takes from it, no gateway file imports a value from the package index, and a process
// with the hook loads the gateway without the big generated files and without any model class
// (and one without it does not), nor the npm undici package (Node's own serves client-node).
import { execFile } from 'node:child_process';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import * as genIndex from '../../../src/kube/gen-index.js';
import * as nodeUndici from '../../../src/kube/node-undici.js';
import { isConfigGenIndexImport, isUndiciImport } from '../../../src/kube/slim-load.js';

const ROOT = join(import.meta.dirname, '../../..');
const dist = dirname(createRequire(import.meta.url).resolve('@kubernetes/client-node/dist/config.js'));
const CONFIG_URL = 'file:///app/node_modules/@kubernetes/client-node/dist/config.js';

describe('isConfigGenIndexImport', () => {
  it.each<[string, string | undefined, boolean]>([
    ['./gen/index.js', CONFIG_URL, true],
    ['./gen/index.js', 'file:///app/node_modules/@kubernetes/client-node/dist/api.js', false],
    ['./gen/index.js', undefined, false],
    ['./gen/index.js', 'file:///app/src/config.js', false],
    ['./gen/models/all.js', CONFIG_URL, false],
    ['@kubernetes/client-node', 'file:///app/src/kube/clients.js', false],
  ])('%s from %s: %s', (specifier, parent, expected) => {
    expect(isConfigGenIndexImport(specifier, parent)).toBe(expected);
  });
});

describe('isUndiciImport', () => {
  it.each<[string, string | undefined, boolean]>([
    ['undici', CONFIG_URL, true],
    ['undici', 'file:///app/node_modules/@kubernetes/client-node/dist/watch.js', true],
    ['undici', 'file:///app/node_modules/@kubernetes/client-node/dist/gen/http/isomorphic-fetch.js', true],
    // node-undici.ts itself loads the package from client-node's package folder, not from dist/.
    ['undici', 'file:///app/node_modules/@kubernetes/client-node/package.json', false],
    ['undici', 'file:///app/src/upstreams/connection.js', false],
    ['undici', undefined, false],
    ['undici/lib/dispatcher/agent.js', CONFIG_URL, false],
  ])('%s from %s: %s', (specifier, parent, expected) => {
    expect(isUndiciImport(specifier, parent)).toBe(expected);
  });
});

it("the stand-in exports every name client-node's config.js imports from its generated index", () => {
  const src = readFileSync(join(dist, 'config.js'), 'utf8');
  const imports = [...src.matchAll(/import\s*\{([^}]*)\}\s*from\s*'\.\/gen\/index\.js'/g)];
  expect(imports).toHaveLength(1);
  const names = (imports[0]?.[1] ?? '')
    .split(',')
    .map((n) => n.trim().split(/\s+as\s+/)[0] ?? '')
    .filter(Boolean);
  expect(names.length).toBeGreaterThan(0);
  for (const n of names) expect(genIndex, n).toHaveProperty(n);
});

it("node-undici.ts exports every name client-node's files import from 'undici'", () => {
  const names = new Set<string>();
  for (const f of files(dist, '.js')) {
    for (const m of readFileSync(f, 'utf8').matchAll(/import\s*\{([^}]*)\}\s*from\s*'undici'/g))
      for (const n of (m[1] ?? '').split(',').map((x) => x.trim().split(/\s+as\s+/)[0] ?? '')) if (n) names.add(n);
  }
  expect([...names].sort()).toEqual(['Agent', 'ProxyAgent', 'fetch']);
  for (const n of names) expect(nodeUndici, n).toHaveProperty(n);
  // No other way in: a default or namespace import of the package would bypass the names above.
  const other = files(dist, '.js').filter((f) => /import\s+(\*\s+as\s+\w+|\w+)\s+from\s*'undici'|require\('undici'\)/.test(readFileSync(f, 'utf8')));
  expect(other).toEqual([]);
});

function files(dir: string, ext = '.ts'): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? files(p, ext) : p.endsWith(ext) ? [p] : [];
  });
}

it('no gateway file imports a value from the client-node index (types only)', () => {
  const offenders = files(join(ROOT, 'src')).filter((f) => /^import (?!type )[^;]*from '@kubernetes\/client-node';/m.test(readFileSync(f, 'utf8')));
  expect(offenders).toEqual([]);
});

/** The client-node files a fresh process loads for the gateway's modules, with or without the hook. */
async function loadedClientNodeFiles(withHook: boolean): Promise<string[]> {
  const script = `
    import { registerHooks } from 'node:module';
    const { loadOnlyUsedClientNode } = await import('./src/kube/slim-load.ts');
    if (${String(withHook)}) loadOnlyUsedClientNode();
    const seen = [];
    registerHooks({ load(url, ctx, next) {
      if (url.includes('/@kubernetes/client-node/')) seen.push(url.split('/@kubernetes/client-node/')[1]);
      if (url.includes('/node_modules/undici/')) seen.push('undici package');
      if (url.includes('/node_modules/jose/')) seen.push('jose package');
      if (url.includes('/node_modules/yaml/')) seen.push('yaml package');
      return next(url, ctx);
    } });
    await import('./src/operator.ts');
    await import('./src/auth/index.ts');
    await import('./src/gateway/app.ts');
    console.log(JSON.stringify(seen));
  `;
  const tsx = join(ROOT, 'node_modules/tsx/dist/cli.mjs');
  const { stdout } = await promisify(execFile)(process.execPath, [tsx, '--input-type=module', '-e', script], { cwd: ROOT, timeout: 60_000 });
  return JSON.parse(stdout.trim().split('\n').pop() ?? '[]') as string[];
}

describe('loading the gateway', { timeout: 90_000 }, () => {
  const big = ['dist/gen/types/ObservableAPI.js', 'dist/gen/types/ObjectParamAPI.js', 'dist/gen/models/all.js', 'dist/index.js'];

  it('with the hook: none of the generated index files, the used API groups only', async () => {
    const seen = await loadedClientNodeFiles(true);
    expect(seen).toContain('dist/config.js');
    expect(seen).toContain('dist/gen/apis/CoreV1Api.js');
    for (const f of big) expect(seen).not.toContain(f);
    expect(seen.filter((f) => f.startsWith('dist/gen/apis/') && f.endsWith('Api.js')).length).toBeLessThan(10);
    // The ObjectSerializer loads its models on first use (lazy-models.ts): none at start-up.
    expect(seen).toContain('dist/gen/models/ObjectSerializer.js');
    expect(seen.filter((f) => f.startsWith('dist/gen/models/') && f !== 'dist/gen/models/ObjectSerializer.js')).toEqual([]);
    // The auth-provider plug-ins load on first use too (lazy-auth.ts).
    for (const f of ['dist/oidc_auth.js', 'dist/azure_auth.js', 'dist/gcp_auth.js']) expect(seen).not.toContain(f);
    // Node's own undici serves client-node's requests (node-undici.ts), not the npm package.
    expect(seen).not.toContain('undici package');
    // jose (OIDC tokens) loads with the first token of a gateway in oidc mode (auth/oidc.ts).
    expect(seen).not.toContain('jose package');
    // YAML is rendered only by scripts/gen-crds.ts (api/v1alpha1/crd-yaml.ts, not in the API index).
    expect(seen).not.toContain('yaml package');
  });

  it('without the hook: config.js brings the whole index (what the hook is for)', async () => {
    const seen = await loadedClientNodeFiles(false);
    expect(seen).toContain('dist/gen/types/ObservableAPI.js');
    expect(seen).toContain('dist/gen/models/V1Pod.js');
    expect(seen).toContain('dist/oidc_auth.js');
    expect(seen).toContain('undici package');
  });
});
