// No credential the gateway sends an upstream reaches sandbox code through any part of a tool's
// result (src/upstreams/result-secrets.ts): per block type, then through a real client connection.
import type { CallToolResult } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { withoutSecrets } from '../../../src/upstreams/result-secrets.js';
import { connect, result, startUpstream, until } from './hostile-upstream.js';

const token = 'ghp_S3cretTokenValue1234567890';
const key = 'k3y-abcdef';
const secrets = [`Bearer ${token}`, key];
const b64 = (s: string): string => Buffer.from(s).toString('base64');
const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 1, 2, 3]).toString('base64');
const withheld = (what: string): { type: string; text: string } => ({
  type: 'text',
  text: expect.stringMatching(new RegExp(`^\\[The ${what} that upstream echo returned here was withheld: it contained a credential`)) as unknown as string,
});

describe('withoutSecrets', () => {
  it.each<[string, unknown, unknown]>([
    ['a text block', { type: 'text', text: `auth was Bearer ${token}` }, { type: 'text', text: 'auth was [redacted]' }],
    [
      'a text block’s _meta and annotations',
      { type: 'text', text: 'ok', _meta: { headers: { authorization: `Bearer ${token}` } }, annotations: { audience: [key] } },
      { type: 'text', text: 'ok', _meta: { headers: { authorization: '[redacted]' } }, annotations: { audience: ['[redacted]'] } },
    ],
    [
      'a resource link’s uri, name, title and description',
      { type: 'resource_link', uri: `https://x/req?auth=${token}`, name: key, title: `t ${key}`, description: `X-Api-Key: ${key}` },
      { type: 'resource_link', uri: 'https://x/req?auth=[redacted]', name: '[redacted]', title: 't [redacted]', description: 'X-Api-Key: [redacted]' },
    ],
    [
      'an embedded resource’s uri, text and _meta',
      { type: 'resource', resource: { uri: `x://${key}`, text: `ok ${token}` }, _meta: { h: token } },
      { type: 'resource', resource: { uri: 'x://[redacted]', text: 'ok [redacted]' }, _meta: { h: '[redacted]' } },
    ],
    [
      'an embedded resource’s blob holding the token',
      { type: 'resource', resource: { uri: 'mem://h', blob: b64(`Authorization: Bearer ${token}`) } },
      withheld('embedded resource'),
    ],
    // Each of the three byte offsets a value can start at in base64's groups of 3.
    ...[0, 1, 2].map((pad): [string, unknown, unknown] => [
      `a blob holding a header value at offset ${String(pad)}`,
      { type: 'resource', resource: { uri: 'mem://h', blob: b64(`${'x'.repeat(pad)}${key}!`) } },
      withheld('embedded resource'),
    ]),
    [
      'a blob without a secret (kept byte for byte; its uri cleaned)',
      { type: 'resource', resource: { uri: `mem://${key}`, blob: png, mimeType: 'image/png' } },
      { type: 'resource', resource: { uri: 'mem://[redacted]', blob: png, mimeType: 'image/png' } },
    ],
    ['an image holding the token', { type: 'image', data: b64(`tEXt ${token}`), mimeType: 'image/png' }, withheld('image content')],
    ['an image whose base64 is the token as written', { type: 'image', data: `AAAA${token}`, mimeType: 'image/png' }, withheld('image content')],
    ['audio holding a header value', { type: 'audio', data: b64(`ID3 ${key}`), mimeType: 'audio/mpeg' }, withheld('audio content')],
    [
      'an image without a secret (data kept; _meta and annotations cleaned)',
      { type: 'image', data: png, mimeType: 'image/png', annotations: { audience: ['user'] }, _meta: { echo: key } },
      { type: 'image', data: png, mimeType: 'image/png', annotations: { audience: ['user'] }, _meta: { echo: '[redacted]' } },
    ],
    ['a block of a type yet unknown', { type: 'future', anything: { deep: [token] } }, { type: 'future', anything: { deep: ['[redacted]'] } }],
  ])('%s', (_name, block, expected) => {
    const out = withoutSecrets({ content: [block] } as CallToolResult, secrets, 'echo');
    expect(out.content).toEqual([expected]);
    expect(JSON.stringify(out)).not.toContain(token);
    expect(JSON.stringify(out)).not.toContain(key);
  });

  it.each<[string, Partial<CallToolResult>, unknown]>([
    ['the result’s _meta', { _meta: { request: { authorization: `Bearer ${token}` } } }, { _meta: { request: { authorization: '[redacted]' } } }],
    ['structuredContent, keys included', { structuredContent: { [key]: [token] } }, { structuredContent: { '[redacted]': ['[redacted]'] } }],
    [
      'an error result',
      { isError: true, content: [{ type: 'text', text: `invalid token ${token}` }] },
      { isError: true, content: [{ type: 'text', text: 'invalid token [redacted]' }] },
    ],
  ])('cleans %s', (_name, r, expected) => {
    expect(withoutSecrets({ content: [], ...r } as CallToolResult, secrets, 'echo')).toMatchObject(expected as object);
  });

  it('returns a result that quotes nothing secret as it came', () => {
    const r = { content: [{ type: 'image', data: png, mimeType: 'image/png' }], structuredContent: { a: [1, null, true] } } as CallToolResult;
    expect(withoutSecrets(r, secrets, 'echo')).toEqual(r);
    expect(withoutSecrets(r, [], 'echo')).toBe(r);
  });
});

describe('a connection’s results', () => {
  const closing: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const done of closing.splice(0).reverse()) await done();
  });

  it('carry no credential the gateway sent in links, blobs, images or _meta', async () => {
    const up = await startUpstream({
      toolsCall: (msg, res) =>
        result(res, msg.id, {
          content: [
            { type: 'resource_link', uri: `https://mcp.example.com/req?auth=${token}`, name: 'request', description: `X-Api-Key: ${key}` },
            { type: 'resource', resource: { uri: 'mem://h', blob: b64(`Authorization: Bearer ${token}`) } },
            { type: 'image', data: png, mimeType: 'image/png', _meta: { headers: { authorization: `Bearer ${token}` } } },
          ],
          _meta: { echo: key },
        }),
    });
    closing.push(() => up.close());
    const { conn } = connect(up.url, { Authorization: `Bearer ${token}`, 'X-Api-Key': key });
    closing.push(() => conn.stop());
    await until(() => conn.state.ready);
    const got = await conn.call('echo', {}, 5_000);
    expect(JSON.stringify(got)).not.toContain(token);
    expect(JSON.stringify(got)).not.toContain(key);
    expect(got.content).toEqual([
      { type: 'resource_link', uri: 'https://mcp.example.com/req?auth=[redacted]', name: 'request', description: 'X-Api-Key: [redacted]' },
      { type: 'text', text: expect.stringContaining('withheld') as unknown as string },
      { type: 'image', data: png, mimeType: 'image/png', _meta: { headers: { authorization: '[redacted]' } } },
    ]);
  });
});
