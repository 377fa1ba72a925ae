// client-node's request factories without their comment lines (src/kube/api-source.ts, applied by
// the hook in slim-load.ts): only whole comment lines go, every line stays, and the stripped
// modules of the groups we use build the same requests as the originals for every method.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createConfiguration } from '@kubernetes/client-node/dist/gen/configuration.js';
import type { RequestContext } from '@kubernetes/client-node/dist/gen/http/http.js';
import { ServerConfiguration } from '@kubernetes/client-node/dist/gen/servers.js';
import { afterAll, describe, expect, it } from 'vitest';
import { parameterNames } from '../../../src/kube/api-client.js';
import { isApiModule, withoutCommentLines } from '../../../src/kube/api-source.js';

const apis = join(dirname(createRequire(import.meta.url).resolve('@kubernetes/client-node/dist/config.js')), 'gen/apis');

describe('withoutCommentLines', () => {
  it.each<[string, string, string | undefined]>([
    ['a doc block', 'a();\n    /**\n     * text\n     * @param x y\n     */\n    b();', 'a();\n\n\n\n\n    b();'],
    ['line comments', '// x\n  // y\nc(); // kept\n', '\n\nc(); // kept\n'],
    ['the source map line', 'a();\n//# sourceMappingURL=x.js.map', 'a();\n//# sourceMappingURL=x.js.map'],
    ['a one-line doc comment (kept)', '/** x */\na();', '/** x */\na();'],
    ['a string with comment marks (kept)', "s('*/*;q=0.8'); t('// no');", "s('*/*;q=0.8'); t('// no');"],
    ['code after a block end', '/**\n * x\n */ a();', undefined],
    ['a block line that is not comment', '/**\n x\n */', undefined],
    ['an unclosed block', 'a();\n/**\n * x', undefined],
    ['a template literal', 'const a = `\n// not a comment\n`;', undefined],
    ['a line continuation', "const a = 'x\\\n// not a comment';", undefined],
  ])('%s', (_name, source, expected) => {
    expect(withoutCommentLines(source)).toBe(expected);
  });

  it.each<[string, boolean]>([
    ['file:///app/node_modules/@kubernetes/client-node/dist/gen/apis/CoreV1Api.js', true],
    ['file:///app/node_modules/@kubernetes/client-node/dist/gen/apis/baseapi.js', false],
    ['file:///app/node_modules/@kubernetes/client-node/dist/gen/types/ObjectParamAPI.js', false],
    ['file:///app/node_modules/other/dist/gen/apis/CoreV1Api.js', false],
  ])('isApiModule(%s): %s', (url, expected) => {
    expect(isApiModule(url)).toBe(expected);
  });
});

type Factory = Record<string, (...args: unknown[]) => Promise<RequestContext>>;
const GROUPS = ['CoreV1Api', 'CustomObjectsApi', 'NetworkingV1Api', 'EventsV1Api', 'CoordinationV1Api', 'AuthenticationV1Api', 'AppsV1Api'];

describe('the stripped request factories against the originals', () => {
  const dir = mkdtempSync(join(tmpdir(), 'api-source-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const config = createConfiguration({ baseServer: new ServerConfiguration('https://k8s.example:6443', {}) });

  /** A copy of the module without comment lines, its relative imports pointing at client-node. */
  async function stripped(group: string): Promise<Record<string, new (c: unknown) => unknown>> {
    const original = readFileSync(join(apis, `${group}.js`), 'utf8');
    const slim = withoutCommentLines(original);
    expect(slim, group).toBeDefined();
    expect(slim?.split('\n').length).toBe(original.split('\n').length);
    expect(slim?.length).toBeLessThan(original.length * 0.7);
    const file = join(dir, `${group}.mjs`);
    writeFileSync(
      file,
      (slim ?? '')
        .replace(/^\/\/# sourceMappingURL=.*$/m, '')
        .replace(/from '(\.\.?\/[^']+)'/g, (_m, p: string) => `from '${new URL(p, pathToFileURL(join(apis, `${group}.js`))).href}'`),
    );
    return (await import(pathToFileURL(file).href)) as Record<string, new (c: unknown) => unknown>;
  }

  it.each(GROUPS)('%s: every method has the same parameters and builds the same request', async (group) => {
    const ours = await stripped(group);
    const theirs = (await import(pathToFileURL(join(apis, `${group}.js`)).href)) as Record<string, new (c: unknown) => unknown>;
    const Ours = ours[`${group}RequestFactory`];
    const Theirs = theirs[`${group}RequestFactory`];
    if (!Ours || !Theirs) throw new Error(`${group}: no request factory`);
    const a = new Ours(config) as Factory;
    const b = new Theirs(config) as Factory;
    const methods = Object.getOwnPropertyNames(Theirs.prototype).filter((m) => m !== 'constructor');
    expect(Object.getOwnPropertyNames(Ours.prototype).filter((m) => m !== 'constructor')).toEqual(methods);
    expect(methods.length).toBeGreaterThan(0);
    for (const m of methods) {
      const fa = a[m];
      const fb = b[m];
      if (!fa || !fb) throw new Error(`${group}.${m} missing`);
      const names = parameterNames(fb);
      expect(parameterNames(fa), m).toEqual(names);
      const args = names.map((n) => (n === 'body' ? { kind: 'X', metadata: { name: 'n' } } : `v-${n}`));
      const [ra, rb] = await Promise.all([fa.call(a, ...args), fb.call(b, ...args)]);
      expect({ url: ra.getUrl(), method: ra.getHttpMethod(), headers: ra.getHeaders(), body: ra.getBody() }, m).toEqual({
        url: rb.getUrl(),
        method: rb.getHttpMethod(),
        headers: rb.getHeaders(),
        body: rb.getBody(),
      });
    }
  });
});
