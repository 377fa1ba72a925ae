// An audit record is history, never work (issue 9): a SandboxRun marked as the record of a session
// call (executor codemode.dev/audit-record) whose status was never written — its gateway stopped
// between the create and the status — is not executed in its session by any replica; once the
// call's time budget is over (pod start-up allowance + timeout + 60 s) it is closed Failed so its
// TTL can run. The session's state shows the code never ran.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GROUP, SANDBOXRUN_KIND, SANDBOXRUN_PLURAL, VERSION, API_VERSION, type SandboxRun } from '../../src/api/v1alpha1/index.js';
import { ANNOTATION_EXECUTOR, AUDIT_EXECUTOR } from '../../src/api/v1alpha1/labels.js';
import { AUDIT_INCOMPLETE_MESSAGE } from '../../src/controller/run-decision.js';
import { createNamespace, deleteNamespace, testKube, until } from './helpers/kube.js';
import { connect, startOperator, type RunningOperator, type TestClient } from './helpers/operator.js';

const k = testKube();
const api = { group: GROUP, version: VERSION, plural: SANDBOXRUN_PLURAL };
// Start-up allowance 20 s: the record's budget is 20 + 1 + 60 s.
const POD_STARTUP_SECONDS = 20;
let ns = '';
let op: RunningOperator;
let client: TestClient | undefined;

beforeAll(async () => {
  ns = await createNamespace(k, 'audit-record');
  op = await startOperator(ns, { CODEMODE_CPU_REQUEST: '10m', CODEMODE_POD_STARTUP_TIMEOUT_SECONDS: String(POD_STARTUP_SECONDS) });
});
afterAll(async () => {
  await client?.close();
  await op?.stop();
  await deleteNamespace(k, ns);
});

describe('an audit record whose status was never written', () => {
  it('is never executed in its session and is closed Failed after its budget', async () => {
    client = await connect(op.url, 'current');
    const created = await client.callTool('create_session', { language: 'python' });
    expect(created.isError ?? false, JSON.stringify(created.content)).toBe(false);
    const session = String(created.structuredContent?.session);
    expect((await client.callTool('execute_code', { session, code: 'n = 1' })).isError ?? false).toBe(false);

    const name = `orphan-record-${Date.now().toString(36)}`;
    await k.custom.createNamespacedCustomObject({
      ...api,
      namespace: ns,
      body: {
        apiVersion: API_VERSION,
        kind: SANDBOXRUN_KIND,
        metadata: { name, annotations: { [ANNOTATION_EXECUTOR]: AUDIT_EXECUTOR } },
        spec: { language: 'python', code: 'n = 100', timeoutSeconds: 1, session },
      },
    });
    const read = async (): Promise<SandboxRun> => (await k.custom.getNamespacedCustomObject({ ...api, namespace: ns, name })) as SandboxRun;
    await until(async () => (await read()).status?.phase === 'Failed', (POD_STARTUP_SECONDS + 1 + 60 + 60) * 1000, 'the orphaned record closed');
    const run = await read();
    expect(run.status?.message).toBe(AUDIT_INCOMPLETE_MESSAGE);
    expect(run.status?.completionTime).toBeDefined();
    expect(run.status?.startTime).toBeUndefined();
    expect(run.metadata.annotations?.[ANNOTATION_EXECUTOR]).toBe(AUDIT_EXECUTOR);
    // Had it been executed, n would be 100.
    const n = await client.callTool('execute_code', { session, code: 'n' });
    expect(n.structuredContent?.result).toBe('1');
  }, 240_000);
});
