// The UpstreamServer API: what the schema accepts and refuses (with messages that say what to
// write), and the generated CRD files.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { renderCrdYaml } from '../../src/api/v1alpha1/crd-yaml.js';
import { buildUpstreamServerCrd, parseUpstreamServer, type JsonSchema } from '../../src/api/v1alpha1/index.js';

const obj = (spec: Record<string, unknown>): unknown => ({ apiVersion: 'codemode.dev/v1alpha1', kind: 'UpstreamServer', metadata: { name: 'github' }, spec });
const ref = { name: 'github-token', key: 'token' };

describe('UpstreamServer spec', () => {
  it('fills the defaults', () => {
    const r = parseUpstreamServer(obj({ url: 'http://github-mcp.tools.svc:8080/mcp' }));
    expect(r).toEqual({ ok: true, server: expect.objectContaining({ spec: { url: 'http://github-mcp.tools.svc:8080/mcp', callTimeoutSeconds: 60 } }) });
  });

  it.each<[string, Record<string, unknown>]>([
    ['https with path and query', { url: 'https://mcp.example.com/v1/mcp?tenant=a' }],
    ['headers and a bearer token', { url: 'http://x:1/mcp', headers: [{ name: 'X-Api-Key', secretKeyRef: ref }], bearerTokenSecretRef: ref }],
    ['allow and deny globs', { url: 'http://x/mcp', tools: { allow: ['get_*', 'list_*'], deny: ['*delete*'] } }],
    ['users and groups', { url: 'http://x/mcp', access: { users: ['alice'], groups: ['dev'] } }],
    ['a timeout', { url: 'http://x/mcp', callTimeoutSeconds: 3600 }],
  ])('accepts %s', (_name, spec) => {
    expect(parseUpstreamServer(obj(spec)).ok).toBe(true);
  });

  it.each<[string, Record<string, unknown>, RegExp]>([
    ['no url', {}, /spec set exactly one of url \(a Streamable HTTP server\) and stdio/],
    ['another scheme', { url: 'ftp://x/mcp' }, /spec\.url must be the http:\/\/ or https:\/\/ URL .* e\.g\. http:\/\/github-mcp/],
    ['a url with spaces', { url: 'http://x y/mcp' }, /spec\.url must be the http/],
    [
      'a reserved header',
      { url: 'http://x/mcp', headers: [{ name: 'Mcp-Session-Id', secretKeyRef: ref }] },
      /spec\.headers\[0\]\.name must not be one the gateway sets itself/,
    ],
    ['a header name with a space', { url: 'http://x/mcp', headers: [{ name: 'X Key', secretKeyRef: ref }] }, /must be an HTTP header name .* e\.g\. X-Api-Key/],
    ['a header without Secret', { url: 'http://x/mcp', headers: [{ name: 'X-Key' }] }, /spec\.headers\[0\]\.secretKeyRef is required/],
    ['a Secret name in capitals', { url: 'http://x/mcp', bearerTokenSecretRef: { name: 'Token', key: 'k' } }, /must be the name of a Secret in this namespace/],
    ['a glob with a space', { url: 'http://x/mcp', tools: { deny: ['get issue'] } }, /spec\.tools\.deny\[0\] must be a tool name or glob/],
    ['a zero timeout', { url: 'http://x/mcp', callTimeoutSeconds: 0 }, /spec\.callTimeoutSeconds must be at least 1/],
  ])('refuses %s with a message that says what to write', (_name, spec, message) => {
    const r = parseUpstreamServer(obj(spec));
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.message).toMatch(message);
      expect(r.message).toMatch(/kubectl edit upstreamserver/);
    }
  });
});

describe('UpstreamServer CRD', () => {
  const crd = buildUpstreamServerCrd();
  const version = crd.spec.versions[0]!;
  const spec = (version.schema.openAPIV3Schema.properties as Record<string, JsonSchema>).spec!;

  it('names the resource', () => {
    expect(crd.metadata.name).toBe('upstreamservers.codemode.dev');
    expect(crd.spec.names).toMatchObject({ kind: 'UpstreamServer', plural: 'upstreamservers', shortNames: ['ups'], categories: ['codemode'] });
    expect(version.subresources).toEqual({ status: {} });
  });

  it('has printer columns for readiness and tools', () => {
    expect(version.additionalPrinterColumns.map((c) => [c.name, c.jsonPath])).toEqual([
      ['Ready', '.status.conditions[?(@.type=="Ready")].status'],
      ['Reason', '.status.conditions[?(@.type=="Ready")].reason'],
      ['Tools', '.status.toolCount'],
      ['URL', '.spec.url'],
      ['Image', '.spec.stdio.image'],
      ['Last-Refresh', '.status.lastRefreshTime'],
      ['Age', '.metadata.creationTimestamp'],
    ]);
  });

  it('lets the API server explain a wrong url (CEL message)', () => {
    const url = (spec.properties as Record<string, JsonSchema>).url!;
    expect(url['x-kubernetes-validations']).toEqual([
      { rule: expect.stringContaining("startsWith('http://')"), message: expect.stringMatching(/e\.g\. http:\/\//) },
    ]);
  });

  it.each(['crds', 'charts/codemode-operator/crds'])('%s/codemode.dev_upstreamservers.yaml equals a fresh generation (npm run gen:crds)', (dir) => {
    const onDisk = readFileSync(fileURLToPath(new URL(`../../${dir}/codemode.dev_upstreamservers.yaml`, import.meta.url)), 'utf8');
    expect(onDisk).toBe(renderCrdYaml(buildUpstreamServerCrd()));
    expect(parse(onDisk)).toEqual(crd);
  });
});
