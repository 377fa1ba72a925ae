// Authentication modes against the real cluster (issue 9): static tokens from a watched Secret,
// TokenReview with a ServiceAccount token and an audience, and OIDC with the access tokens of a
// real OpenID provider (the forged and broken tokens, and a broken issuer, are in
// test/unit/auth/oidc.test.ts, against a local issuer that signs whatever a row needs).
import { randomBytes } from 'node:crypto';
import { GROUP, LABEL_OWNER, SANDBOXRUN_PLURAL, SANDBOXSESSION_PLURAL, VERSION, type SandboxRun, type SandboxSession } from '../../src/api/v1alpha1/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNamespace, deleteNamespace, testKube, until } from './helpers/kube.js';
import { connect, startOperator, type RunningOperator } from './helpers/operator.js';
import { startOpenIdProvider, type OpenIdProvider } from './helpers/openid-provider.js';

const k = testKube();
let ns = '';
const tok = (): string => `t-${randomBytes(16).toString('hex')}`;
const alice = tok();
const bob = tok();
const carol = tok();

beforeAll(async () => {
  ns = await createNamespace(k, 'auth');
});
afterAll(async () => {
  await deleteNamespace(k, ns);
});

/** Status of an MCP initialize POST with this Authorization header, and its WWW-Authenticate. */
async function probe(url: string, authorization?: string): Promise<{ status: number; header: string | null }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...(authorization && { authorization }) },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'probe', version: '0' } },
    }),
  });
  await res.body?.cancel();
  return { status: res.status, header: res.headers.get('www-authenticate') };
}

const readRun = async (name: string): Promise<SandboxRun> =>
  (await k.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: SANDBOXRUN_PLURAL, name })) as SandboxRun;

async function runsCode(url: string, token: string): Promise<boolean> {
  const client = await connect(url, 'current', { authorization: `Bearer ${token}` });
  try {
    const r = await client.callTool('list_sessions', {});
    return !r.isError;
  } finally {
    await client.close();
  }
}

describe('mode tokens', () => {
  let op: RunningOperator;
  const csv = (lines: string[]): Record<string, string> => ({ 'tokens.csv': `${lines.join('\n')}\n` });

  beforeAll(async () => {
    await k.core.createNamespacedSecret({
      namespace: ns,
      body: { metadata: { name: 'team-tokens' }, stringData: csv([`${alice},alice,u1,"dev"`, `${bob},bob,u2`]) },
    });
    op = await startOperator(ns, { CODEMODE_AUTH_MODE: 'tokens', CODEMODE_AUTH_TOKENS_SECRET: 'team-tokens' });
  });
  afterAll(async () => op?.stop());

  it('serves listed tokens and refuses others with 401 and the metadata pointer', async () => {
    expect(await runsCode(op.url, alice)).toBe(true);
    for (const auth of [undefined, `Bearer ${tok()}`, 'Basic YWxpY2U6eA==']) {
      const r = await probe(op.url, auth);
      expect(r.status).toBe(401);
      expect(r.header).toMatch(
        /^Bearer resource_metadata="http:\/\/127\.0\.0\.1:\d+\/\.well-known\/oauth-protected-resource\/mcp", error="invalid_(token|request)"/,
      );
    }
  });

  it('records the caller as the owner of its runs and sessions (field and label)', async () => {
    const client = await connect(op.url, 'current', { authorization: `Bearer ${bob}` });
    try {
      const run = await client.callTool('execute_code', { code: 'print(1)' });
      const session = await client.callTool('create_session', { language: 'python' });
      const r = await readRun(String(run.structuredContent?.run));
      const s = (await k.custom.getNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: ns,
        plural: SANDBOXSESSION_PLURAL,
        name: String(session.structuredContent?.session),
      })) as SandboxSession;
      for (const obj of [r, s]) {
        expect(obj.spec.owner).toEqual({ user: 'bob' });
        expect(obj.metadata.labels?.[LABEL_OWNER]).toBe('bob');
      }
    } finally {
      await client.close();
    }
  });

  it("keeps each user's sessions and files to themselves: another user's session is 'not found' like a name that does not exist", async () => {
    const a = await connect(op.url, 'current', { authorization: `Bearer ${alice}` });
    const b = await connect(op.url, 'current', { authorization: `Bearer ${bob}` });
    try {
      const created = await a.callTool('create_session', { language: 'python' });
      const mine = String(created.structuredContent?.session);
      await a.callTool('execute_code', { session: mine, code: 'secret = 41' });
      await a.callTool('write_file', { session: mine, path: 'notes.txt', content: 'private' });
      const ghost = `${mine.slice(0, -3)}zzz`;
      const listed = await b.callTool('list_sessions', {});
      expect(JSON.stringify(listed.structuredContent)).not.toContain(mine);
      // Every tool answers bob exactly as for a name that does not exist.
      const text = (r: { content: Array<{ text?: string }> }, name: string): string =>
        r.content
          .map((c) => c.text ?? '')
          .join('\n')
          .replaceAll(name, 'NAME');
      for (const [tool, args] of [
        ['execute_code', { code: 'secret' }],
        ['read_file', { path: 'notes.txt' }],
        ['write_file', { path: 'x.txt', content: 'x' }],
        ['list_files', {}],
        ['close_session', {}],
      ] as const) {
        const theirs = await b.callTool(tool, { ...args, session: mine });
        const none = await b.callTool(tool, { ...args, session: ghost });
        expect(theirs.isError ?? false, `${tool}: ${JSON.stringify(theirs.content)}`).toBe(tool !== 'close_session');
        expect(text(theirs, mine)).toBe(text(none, ghost));
        expect(JSON.stringify(theirs.structuredContent ?? {}).replaceAll(mine, 'NAME')).toBe(
          JSON.stringify(none.structuredContent ?? {}).replaceAll(ghost, 'NAME'),
        );
      }
      // Alice's session is untouched by all of that.
      const still = await a.callTool('execute_code', { session: mine, code: 'secret + 1' });
      expect(still.structuredContent?.result).toBe('42');
      expect(JSON.stringify((await a.callTool('list_sessions', {})).structuredContent)).toContain(mine);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('follows edits of the Secret without a restart', async () => {
    await k.core.replaceNamespacedSecret({
      namespace: ns,
      name: 'team-tokens',
      body: { metadata: { name: 'team-tokens' }, stringData: csv([`${bob},bob,u2`, `${carol},carol,u3`]) },
    });
    await until(async () => (await probe(op.url, `Bearer ${alice}`)).status === 401, 30_000, "alice's removed token refused");
    await until(async () => (await probe(op.url, `Bearer ${carol}`)).status !== 401, 30_000, "carol's new token accepted");
    expect(await runsCode(op.url, carol)).toBe(true);
    expect(await runsCode(op.url, bob)).toBe(true);
  });
});

describe('mode kubernetes (TokenReview)', () => {
  let op: RunningOperator;
  const AUDIENCE = 'codemode-e2e';
  const saToken = async (audience: string): Promise<string> =>
    (await k.core.createNamespacedServiceAccountToken({ namespace: ns, name: 'agent', body: { spec: { audiences: [audience], expirationSeconds: 600 } } }))
      .status?.token ?? '';

  beforeAll(async () => {
    await k.core.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name: 'agent' } } });
    op = await startOperator(ns, { CODEMODE_AUTH_MODE: 'kubernetes', CODEMODE_AUTH_AUDIENCE: AUDIENCE });
  });
  afterAll(async () => op?.stop());

  it('accepts a ServiceAccount token issued for its audience', async () => {
    expect(await runsCode(op.url, await saToken(AUDIENCE))).toBe(true);
  });

  it.each([
    ['a token for another audience', async () => `Bearer ${await saToken('someone-else')}`],
    ['a garbage token', async () => `Bearer ${tok()}`],
    ['no token', async () => undefined],
  ])('refuses %s with 401', async (_n, auth) => {
    expect((await probe(op.url, await auth())).status).toBe(401);
  });
});

describe('mode oidc (a real OpenID provider)', () => {
  let op: RunningOperator;
  let provider: OpenIdProvider;
  const AUDIENCE = 'https://codemode-e2e.example/mcp';

  beforeAll(async () => {
    provider = await startOpenIdProvider({
      address: '127.0.0.1',
      host: '127.0.0.1',
      audiences: [AUDIENCE, 'https://elsewhere.example/api'],
      clients: ['ci-agent'],
    });
    op = await startOperator(ns, {
      CODEMODE_AUTH_MODE: 'oidc',
      CODEMODE_OIDC_ISSUER: provider.issuer,
      CODEMODE_OIDC_AUDIENCE: AUDIENCE,
      CODEMODE_USERNAME_PREFIX: 'oidc:',
    });
  });
  afterAll(async () => {
    await op?.stop();
    await provider?.close();
  });

  it("runs code for the provider's access token (an RFC 9068 JWT) and records its subject as the owner", async () => {
    const client = await connect(op.url, 'current', { authorization: `Bearer ${await provider.token('ci-agent')}` });
    try {
      const run = await client.callTool('execute_code', { code: 'print(6 * 7)' });
      expect(run.structuredContent).toMatchObject({ phase: 'Succeeded', stdout: '42\n' });
      const r = await readRun(String(run.structuredContent?.run));
      expect(r.spec.owner).toEqual({ user: 'oidc:ci-agent', groups: ['dev'] });
    } finally {
      await client.close();
    }
  });

  it("refuses the same provider's token for another resource with 401", async () => {
    const header = `Bearer ${await provider.token('ci-agent', 'https://elsewhere.example/api')}`;
    expect((await probe(op.url, header)).status).toBe(401);
  });
});
