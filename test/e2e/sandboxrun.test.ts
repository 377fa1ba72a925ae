// SandboxRun lifecycle on the real cluster: runs created without the gateway (as kubectl apply
// does), idempotent reconcile, owner-reference cleanup, TTL, admin limits, image errors, bad MCP
// input, and a caller that disconnects mid-run.
import { setHeaderOptions } from '@kubernetes/client-node/dist/middleware.js';
import { PatchStrategy } from '@kubernetes/client-node/dist/patch.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GROUP, SANDBOXRUN_PLURAL, VERSION, type SandboxRun } from '../../src/api/v1alpha1/index.js';
import { podNameForRun } from '../../src/sandbox/names.js';
import { createNamespace, deleteNamespace, testKube, until } from './helpers/kube.js';
import { connect, startOperator, type RunningOperator } from './helpers/operator.js';

const k = testKube();
let ns = '';
let op: RunningOperator;

beforeAll(async () => {
  ns = await createNamespace(k, 'sbr');
  op = await startOperator(ns, { CODEMODE_MAX_TIMEOUT_SECONDS: '60', CODEMODE_MAX_CODE_BYTES: '2000', CODEMODE_MAX_MEMORY: '1Gi' });
});
afterAll(async () => {
  await op?.stop();
  await deleteNamespace(k, ns);
});

const api = { group: GROUP, version: VERSION, plural: SANDBOXRUN_PLURAL };

async function apply(name: string, spec: Record<string, unknown>): Promise<void> {
  await k.custom.createNamespacedCustomObject({
    ...api,
    namespace: ns,
    body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'SandboxRun', metadata: { name }, spec },
  });
}

async function get(name: string): Promise<SandboxRun | undefined> {
  try {
    return (await k.custom.getNamespacedCustomObject({ ...api, namespace: ns, name })) as SandboxRun;
  } catch {
    return undefined;
  }
}

async function finished(name: string): Promise<SandboxRun> {
  let run: SandboxRun | undefined;
  await until(
    async () => {
      run = await get(name);
      return ['Succeeded', 'Failed', 'TimedOut'].includes(run?.status?.phase ?? '');
    },
    90_000,
    `SandboxRun ${name} to finish`,
  );
  return run as SandboxRun;
}

async function podExists(name: string): Promise<boolean> {
  try {
    await k.core.readNamespacedPod({ namespace: ns, name });
    return true;
  } catch {
    return false;
  }
}

describe('SandboxRun without the gateway', () => {
  it('runs an applied object and reports in .status, with Events', async () => {
    // Still executing after 250 ms: a Started Event too (short runs get only the outcome's Event).
    await apply('applied', { language: 'bash', code: 'sleep 1; echo "applied $((1+1))"' });
    const run = await finished('applied');
    expect(run.status).toMatchObject({ phase: 'Succeeded', exitCode: 0, stdout: 'applied 2\n', reason: 'Succeeded', observedGeneration: 1 });
    expect(run.status?.conditions?.find((c) => c.type === 'Complete')).toMatchObject({ status: 'True', reason: 'Succeeded' });
    await until(
      async () => {
        const events = await k.core.listNamespacedEvent({ namespace: ns, fieldSelector: 'involvedObject.name=applied' });
        return ['Started', 'Succeeded'].every((r) => events.items.some((e) => e.reason === r));
      },
      10_000,
      'Started and Succeeded events',
    );
    // Single-use pod: gone after the run.
    await until(async () => !(await podExists(podNameForRun('applied'))), 30_000, 'pod deleted after the run');
  });

  it("keeps a session exception's text in the run's status and out of its Event (Events are namespace-readable)", async () => {
    const mcp = await connect(op.url, 'current');
    try {
      const created = await mcp.callTool('create_session', { language: 'python' });
      const session = String(created.structuredContent?.session);
      await apply('in-session', { session, language: 'python', code: 'raise ValueError("evalue-from-the-program")', timeoutSeconds: 30 });
      const run = await finished('in-session');
      expect(run.status).toMatchObject({ phase: 'Failed', reason: 'Exception' });
      expect(run.status?.message).toContain('evalue-from-the-program');
      let notes: string[] = [];
      await until(
        async () => {
          const events = await k.core.listNamespacedEvent({ namespace: ns, fieldSelector: 'involvedObject.name=in-session' });
          notes = events.items.filter((e) => e.reason === 'Failed').map((e) => e.message ?? '');
          return notes.length > 0;
        },
        10_000,
        'the Failed event',
      );
      expect(notes.join('\n')).not.toContain('evalue-from-the-program');
      expect(notes[0]).toMatch(/exception.*status/);
      await mcp.callTool('close_session', { session });
    } finally {
      await mcp.close();
    }
  });

  // Without the chart's owner policy, whoever may write sandboxruns/status could clear a finished
  // run's status: the run must not look unstarted and run again (in a session: twice its effect).
  it('runs a finished run once, even when its status is cleared by hand', async () => {
    const mcp = await connect(op.url, 'current');
    try {
      const created = await mcp.callTool('create_session', { language: 'python' });
      const session = String(created.structuredContent?.session);
      await apply('cleared', { session, language: 'python', code: 'n = globals().get("n", 0) + 1\nprint(n)', timeoutSeconds: 30 });
      expect((await finished('cleared')).status).toMatchObject({ phase: 'Succeeded', stdout: '1\n' });
      const cleared = (await k.custom.patchNamespacedCustomObjectStatus(
        { ...api, namespace: ns, name: 'cleared', body: [{ op: 'replace', path: '/status', value: {} }] },
        setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
      )) as SandboxRun;
      expect(cleared.status ?? {}).toEqual({});
      // Ended again without running: its outcome read back from the session (which keeps the
      // call's result), or Failed saying it is not run again.
      const run = await finished('cleared');
      if (run.status?.phase === 'Succeeded') expect(run.status.stdout).toBe('1\n');
      else expect(run.status?.message).toMatch(/not run again/);
      const after = await mcp.callTool('execute_code', { session, code: 'print(n)' });
      expect(after.structuredContent?.stdout).toBe('1\n');
      await mcp.callTool('close_session', { session });
    } finally {
      await mcp.close();
    }
  });

  it('reconciles idempotently: twice more changes nothing', async () => {
    const before = await get('applied');
    await op.operator.controller.reconcile(`${ns}/applied`);
    await op.operator.controller.reconcile(`${ns}/applied`);
    const after = await get('applied');
    expect(after?.status).toEqual(before?.status);
    expect(after?.metadata.resourceVersion).toBe(before?.metadata.resourceVersion);
    expect(await podExists(podNameForRun('applied'))).toBe(false);
  });

  it('deletes the pod when a running SandboxRun is deleted', async () => {
    await apply('deleted', { language: 'sh', code: 'sleep 50', timeoutSeconds: 55 });
    const pod = podNameForRun('deleted');
    await until(async () => (await get('deleted'))?.status?.phase === 'Running', 60_000, 'run Running');
    expect(await podExists(pod)).toBe(true);
    await k.custom.deleteNamespacedCustomObject({ ...api, namespace: ns, name: 'deleted' });
    await until(async () => !(await podExists(pod)), 60_000, 'the owned pod to be garbage-collected');
  });

  it('deletes a finished run after ttlSecondsAfterFinished', async () => {
    await apply('short-lived', { language: 'sh', code: 'true', ttlSecondsAfterFinished: 1 });
    await finished('short-lived').catch(() => undefined);
    await until(async () => (await get('short-lived')) === undefined, 30_000, 'the run to be deleted after its TTL');
  });

  it.each([
    [{ language: 'sh', code: 'true', timeoutSeconds: 120 }, /spec\.timeoutSeconds: timeout 120s is above the maximum of 60s/],
    [{ language: 'sh', code: 'true', resources: { memory: '4Gi' } }, /spec\.resources\.memory: memory 4Gi is above the maximum of 1Gi/],
    [{ language: 'sh', code: 'x'.repeat(3000) }, /spec\.code: the code is 3000 bytes, above the maximum of 2000/],
  ])('records a spec beyond the admin limits as Failed/InvalidSpec (%#)', async (spec, message) => {
    const name = `invalid-${Math.random().toString(36).slice(2, 8)}`;
    await apply(name, spec);
    const run = await finished(name);
    expect(run.status).toMatchObject({ phase: 'Failed', reason: 'InvalidSpec' });
    expect(run.status?.message).toMatch(message);
  });

  it('lets the API server reject a malformed spec with a clear message', async () => {
    const err = await apply('bad-language', { language: 'cobol', code: 'x' }).catch((e: unknown) => e as { code: number; body: string });
    expect(err).toMatchObject({ code: 422 });
    const message = (JSON.parse((err as { body: string }).body) as { message: string }).message;
    expect(message).toMatch(/spec.language: Unsupported value: "cobol": supported values: "python"/);
  });

  it('reports an image that cannot be pulled as ImageNotFound', async () => {
    const ns2 = await createNamespace(k, 'sbr-image');
    const op2 = await startOperator(ns2, { CODEMODE_SANDBOX_IMAGE: 'codemode.local/does-not-exist:v1' });
    try {
      const client = await connect(op2.url, 'current');
      const r = await client.callTool('execute_code', { code: 'print(1)' });
      await client.close();
      expect(r.isError).toBe(true);
      expect(r.structuredContent).toMatchObject({ phase: 'Failed', reason: 'ImageNotFound' });
      expect(r.content[0]?.text).toMatch(/could not be pulled/);
    } finally {
      await op2.stop();
      await deleteNamespace(k, ns2);
    }
  });
});

describe('execute_code input errors and disconnects', () => {
  it.each([
    [{ code: 'x'.repeat(2500) }, /2500 bytes.*limit is 2000/s],
    [{ code: 'print(1)', language: 'cobol' }, /language/],
    [{ code: 'print(1)', timeout_seconds: 600 }, /timeout_seconds/],
    [{ code: '' }, /code/],
  ])('answers bad input with an isError result that says what to fix (%#)', async (args, message) => {
    const client = await connect(op.url, '2025');
    const r = await client.callTool('execute_code', args);
    await client.close();
    expect(r.isError).toBe(true);
    expect(r.content.map((c) => c.text).join('\n')).toMatch(message);
  });

  it('finishes and records a run whose caller disconnected', async () => {
    const client = await connect(op.url, '2025');
    const marker = `done-${Date.now()}`;
    const call = client.callTool('execute_code', { code: `import time\ntime.sleep(3)\nprint("${marker}")`, timeout_seconds: 30 }).catch(() => 'aborted');
    await until(
      async () => {
        const list = (await k.custom.listNamespacedCustomObject({ ...api, namespace: ns })) as { items: SandboxRun[] };
        return list.items.some((r) => r.spec.code.includes(marker) && r.status?.phase === 'Running');
      },
      60_000,
      'the run to start',
    );
    await client.close();
    await call;
    await until(
      async () => {
        const list = (await k.custom.listNamespacedCustomObject({ ...api, namespace: ns })) as { items: SandboxRun[] };
        const run = list.items.find((r) => r.spec.code.includes(marker));
        return run?.status?.phase === 'Succeeded' && run.status.stdout === `${marker}\n`;
      },
      60_000,
      'the abandoned run to complete and be recorded',
    );
  });
});
