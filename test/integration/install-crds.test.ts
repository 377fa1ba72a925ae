// scripts/install-crds.ts (npm start, npm run bench) on the real API server: it applies this
// checkout's crds/ (the kinds src/api defines) and returns once the API server serves each of them.
import { fileURLToPath } from 'node:url';
import { ApiextensionsV1Api, KubernetesObjectApi } from '@kubernetes/client-node';
import { expect, it } from 'vitest';
import { GROUP, SANDBOXPROFILE_KIND, SANDBOXRUN_KIND, SANDBOXSESSION_KIND, UPSTREAMSERVER_KIND, VERSION } from '../../src/api/v1alpha1/index.js';
import { crdDocuments, installCrds } from '../../scripts/install-crds.js';
import { k } from './helpers/table.js';

const dir = fileURLToPath(new URL('../../crds', import.meta.url));
const KINDS = [SANDBOXPROFILE_KIND, SANDBOXRUN_KIND, SANDBOXSESSION_KIND, UPSTREAMSERVER_KIND].sort();

it('finds in crds/ one CRD per kind of src/api, all of the API group and version', () => {
  const crds = crdDocuments(dir);
  expect(crds.map((c) => c.spec.names.kind).sort()).toEqual(KINDS);
  for (const c of crds) {
    expect(c.spec.group).toBe(GROUP);
    expect(c.spec.versions.filter((v) => v.served).map((v) => v.name)).toEqual([VERSION]);
  }
});

it('applies them again over what kubectl applied, and returns only when each kind is served', async () => {
  await installCrds(k.kc, dir, 'codemode-install-test');
  const api = KubernetesObjectApi.makeApiClient(k.kc);
  for (const kind of KINDS) {
    const list = await api.list(`${GROUP}/${VERSION}`, kind, undefined, undefined, undefined, undefined, undefined, undefined, 1);
    expect(list.items).toBeInstanceOf(Array);
  }
  // What the API server holds is the file's schema, enums and defaults included (a plain object
  // serialized as client-node's model loses them).
  const crd = await k.kc.makeApiClient(ApiextensionsV1Api).readCustomResourceDefinition({ name: `sandboxruns.${GROUP}` });
  const language = crd.spec.versions[0]?.schema?.openAPIV3Schema?.properties?.spec?.properties?.language;
  expect(language?._enum).toEqual(['python', 'bash', 'sh', 'node', 'javascript']);
  expect(language?._default).toBe('python');
});
