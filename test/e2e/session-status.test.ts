// One writer per SandboxSession status field (issue 13): the controller and the gateway apply
// their own fields with server-side apply under distinct field managers, on the real API server,
// while both write at once; a dead interpreter reported by the gateway becomes phase Lost; a
// status naming a pod the session does not own is not used.
import { setHeaderOptions } from '@kubernetes/client-node/dist/middleware.js';
import { PatchStrategy } from '@kubernetes/client-node/dist/patch.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CONTROLLER_FIELD_MANAGER,
  GATEWAY_FIELD_MANAGER,
  GATEWAY_LOST_FIELD_MANAGER,
  GROUP,
  SANDBOXSESSION_PLURAL,
  VERSION,
  type SandboxSession,
} from '../../src/api/v1alpha1/index.js';
import { createNamespace, deleteNamespace, testKube, until } from './helpers/kube.js';
import { connect, startOperator, type RunningOperator, type TestClient } from './helpers/operator.js';

const k = testKube();
let ns = '';
let op: RunningOperator;
let mcp: TestClient;

beforeAll(async () => {
  ns = await createNamespace(k, 'sstatus');
  op = await startOperator(ns);
  mcp = await connect(op.url, 'current');
});
afterAll(async () => {
  await mcp?.close();
  await op?.stop();
  await deleteNamespace(k, ns);
});

type ManagedSession = SandboxSession & {
  metadata: { managedFields?: Array<{ manager?: string; subresource?: string; fieldsV1?: { 'f:status'?: Record<string, unknown> } }> };
};

const read = async (name: string): Promise<ManagedSession> =>
  (await k.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: SANDBOXSESSION_PLURAL, name })) as ManagedSession;

/** The status fields each field manager owns, e.g. { 'codemode-gateway': ['f:runCount', ...] }. */
function owners(s: ManagedSession): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const m of s.metadata.managedFields ?? []) {
    const fields = Object.keys(m.fieldsV1?.['f:status'] ?? {});
    if (m.manager && fields.length) out[m.manager] = [...(out[m.manager] ?? []), ...fields];
  }
  return out;
}

async function newSession(): Promise<string> {
  const r = await mcp.callTool('create_session', { language: 'python' });
  expect(r.isError ?? false, JSON.stringify(r.content)).toBe(false);
  return String(r.structuredContent?.session);
}

describe('SandboxSession status writers', () => {
  it('keeps every call counted while the controller rewrites the status at the same time', async () => {
    const name = await newSession();
    const calls = 25;
    // Label changes make the controller reconcile (and, as expiresAt moves with each activity
    // write, apply its status) throughout the calls.
    let stop = false;
    const churn = (async (): Promise<number> => {
      let n = 0;
      while (!stop) {
        await k.custom
          .patchNamespacedCustomObject({
            group: GROUP,
            version: VERSION,
            namespace: ns,
            plural: SANDBOXSESSION_PLURAL,
            name,
            body: [{ op: 'add', path: '/metadata/labels/churn', value: String(n++) }],
          })
          .catch(() => undefined);
        await new Promise((r) => setTimeout(r, 50));
      }
      return n;
    })();
    for (let i = 1; i <= calls; i++) {
      const r = await mcp.callTool('execute_code', { session: name, code: `${i}` });
      expect(r.structuredContent?.result).toBe(String(i));
      await new Promise((r) => setTimeout(r, 40));
    }
    stop = true;
    expect(await churn).toBeGreaterThan(5);
    // Activity is written at most once a second, after the reply: wait for the last write.
    await until(async () => (await read(name)).status?.runCount === calls, 30_000, `runCount ${calls}`);
    const s = await read(name);
    expect(s.status).toMatchObject({ phase: 'Ready', runCount: calls });
    const own = owners(s);
    expect(own[GATEWAY_FIELD_MANAGER]?.sort()).toEqual(['f:lastActivityTime', 'f:runCount']);
    expect(own[CONTROLLER_FIELD_MANAGER]).toEqual(expect.arrayContaining(['f:phase', 'f:podName', 'f:expiresAt', 'f:conditions']));
    expect(own[CONTROLLER_FIELD_MANAGER]).not.toContain('f:runCount');
    // expiresAt is the controller's, computed from the gateway's lastActivityTime.
    await until(
      async () => {
        const now = await read(name);
        return Date.parse(now.status?.expiresAt ?? '') === Date.parse(now.status?.lastActivityTime ?? '') + 600_000;
      },
      30_000,
      'expiresAt = lastActivityTime + idle timeout',
    );
  });

  it('turns a dead interpreter reported by the gateway into phase Lost with what it saw', async () => {
    const name = await newSession();
    const r = await mcp.callTool('execute_code', { session: name, code: 'import os, signal\nos.kill(os.getpid(), signal.SIGKILL)' });
    expect(r.isError).toBe(true);
    await until(async () => (await read(name)).status?.phase === 'Lost', 30_000, 'phase Lost');
    const s = await read(name);
    expect(s.status?.kernelLost?.message).toBeTruthy();
    expect(s.status?.message).toContain(s.status?.kernelLost?.message);
    expect(Object.keys(owners(s))).toEqual(expect.arrayContaining([GATEWAY_LOST_FIELD_MANAGER, CONTROLLER_FIELD_MANAGER]));
    const again = await mcp.callTool('execute_code', { session: name, code: '1' });
    expect(again.isError).toBe(true);
    expect(JSON.stringify(again.content)).toMatch(/lost/i);
  });

  // A status is only a record: someone allowed to write sandboxsessions/status (without the
  // chart's owner policy) pointed one session at another's pod. Nothing of the first may run
  // there, and the pod named must not be deleted.
  it('uses no pod its status names that it does not own, fails, and leaves that pod alone', async () => {
    const victim = await newSession();
    const forger = await newSession();
    // A value no generated name can hold (they are hex): '42' once matched a pod name's digits.
    const SECRET = 'victim-secret-zq';
    await mcp.callTool('execute_code', { session: victim, code: `secret = '${SECRET}'` });
    const victimPod = String((await read(victim)).status?.podName);
    const forgerPod = String((await read(forger)).status?.podName);
    await k.custom.patchNamespacedCustomObjectStatus(
      { group: GROUP, version: VERSION, namespace: ns, plural: SANDBOXSESSION_PLURAL, name: forger, body: { status: { podName: victimPod } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    // The gateway refuses before any code is sent (its cache may or may not show the write yet).
    await until(
      async () => {
        const r = await mcp.callTool('execute_code', { session: forger, code: 'print(secret)' });
        expect(JSON.stringify(r)).not.toContain(SECRET);
        return r.isError === true;
      },
      30_000,
      'the forged session refused',
    );
    await until(async () => (await read(forger)).status?.reason === 'ForeignPod', 30_000, 'the forged session Failed with ForeignPod');
    const failed = await read(forger);
    expect(failed.status).toMatchObject({ phase: 'Failed', reason: 'ForeignPod' });
    expect(failed.status?.message).toContain(victimPod);
    const refused = await mcp.callTool('execute_code', { session: forger, code: 'print(secret)' });
    expect(refused.isError).toBe(true);
    expect(JSON.stringify(refused)).not.toContain(SECRET);
    // The victim's pod and state are intact; the forger's own pod went with its session's failure.
    const pod = await k.core.readNamespacedPod({ namespace: ns, name: victimPod });
    expect(pod.metadata?.deletionTimestamp).toBeUndefined();
    const still = await mcp.callTool('execute_code', { session: victim, code: 'print(secret)' });
    expect(still.structuredContent?.stdout).toBe(`${SECRET}\n`);
    await until(
      async () =>
        k.core.readNamespacedPod({ namespace: ns, name: forgerPod }).then(
          (p) => p.metadata?.deletionTimestamp !== undefined,
          () => true,
        ),
      30_000,
      "the forger's own pod deleted",
    );
  });
});
