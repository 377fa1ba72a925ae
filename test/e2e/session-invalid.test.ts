// A SandboxSession applied with kubectl that the gateway refuses (here one past the administrator's
// idle-timeout maximum, which the CRD cannot know) is Failed with the reason, and deleted at the
// maximum lifetime like any session: it holds no ResourceQuota place for ever. Its owner name, 200
// astral characters, is accepted as the API server accepts it (zod counts code points, as
// maxLength does). Package requirements, which only zod checked, the API server checks too.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GROUP, SANDBOXSESSION_PLURAL, VERSION, type SandboxSession } from '../../src/api/v1alpha1/index.js';
import { createNamespace, deleteNamespace, testKube, until } from './helpers/kube.js';
import { startOperator, type RunningOperator } from './helpers/operator.js';

const k = testKube();
let ns = '';
let op: RunningOperator;
const api = { group: GROUP, version: VERSION, plural: SANDBOXSESSION_PLURAL };

beforeAll(async () => {
  ns = await createNamespace(k, 'sinvalid');
  op = await startOperator(ns, { CODEMODE_SESSION_MAX_LIFETIME_SECONDS: '60', CODEMODE_SESSION_MAX_IDLE_TIMEOUT_SECONDS: '60' });
});
afterAll(async () => {
  await op?.stop();
  await deleteNamespace(k, ns);
});

describe('a session the API server accepts and the gateway refuses', () => {
  it('is Failed with the reason, then deleted at its maximum lifetime', async () => {
    await k.custom.createNamespacedCustomObject({
      ...api,
      namespace: ns,
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'SandboxSession',
        metadata: { name: 'astral' },
        spec: { language: 'python', owner: { user: '𝒳'.repeat(200) } },
      },
    });
    const read = (): Promise<SandboxSession | undefined> =>
      k.custom.getNamespacedCustomObject({ ...api, namespace: ns, name: 'astral' }).then(
        (s) => s as SandboxSession,
        () => undefined,
      );
    await until(async () => (await read())?.status?.phase === 'Failed', 30_000, 'the session Failed');
    expect((await read())?.status).toMatchObject({ phase: 'Failed', reason: 'InvalidSpec' });
    expect((await read())?.status?.message).toMatch(
      /^Invalid SandboxSession: spec\.idleTimeoutSeconds=600 is above the maximum 60 \(600 is its default when left out\)/,
    );
    await until(async () => (await read()) === undefined, 120_000, 'the invalid session deleted at its maximum lifetime');
  }, 180_000);

  // The requirement patterns are the CRD's too: such a session never reaches the controller.
  it.each(['--index-url=http://example.invalid', 'git+https://example.invalid/x.git', '../x'])('is not accepted with packages %s', async (pkg) => {
    const create = k.custom.createNamespacedCustomObject({
      ...api,
      namespace: ns,
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'SandboxSession',
        metadata: { generateName: 'pkg-' },
        spec: { language: 'python', packages: ['tabulate', pkg] },
      },
    });
    await expect(create).rejects.toThrow(/must be a package name/);
  });
});
