// An audit record is history, never work (issue 9): a SandboxRun marked as the record of a session
// call (executor codemode.dev/audit-record) whose status was never written — its gateway stopped
// between the create and the status — is not executed in its session by any replica; once the
// call's time budget is over (pod start-up allowance + timeout + 60 s) it is closed Failed so its
// TTL can run. The session's state shows the code never ran.
// And the writer against the API server: calls of one session share records (status.calls), which
// the API server accepts with the generated CRD schema.
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GROUP, SANDBOXRUN_KIND, SANDBOXRUN_PLURAL, VERSION, API_VERSION, parseSandboxRun, type SandboxRun } from '../../src/api/v1alpha1/index.js';
import { ANNOTATION_EXECUTOR, AUDIT_EXECUTOR, LABEL_SESSION } from '../../src/api/v1alpha1/labels.js';
import { auditEntry } from '../../src/audit/record.js';
import { AuditWriter, type AuditResult } from '../../src/audit/writer.js';
import { runLabelValue } from '../../src/sandbox/names.js';
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

describe('the audit writer', () => {
  it("writes a session's calls together (up to a record's worth), each session apart, and the controller leaves the records alone", async () => {
    const tag = Date.now().toString(36);
    const call = (session: string, i: number, failed = false) =>
      auditEntry({
        name: `w-${tag}-${session}-${i}`,
        namespace: ns,
        session,
        owner: { user: 'alice' },
        language: 'python',
        timeoutSeconds: 30,
        code: `x = ${i}`,
        startedMs: Date.now() + i,
        endedMs: Date.now() + i + 1,
        outcome: failed
          ? { phase: 'Failed', reason: 'Exception', truncated: false, stdoutBytes: 0, stderrBytes: 9, durationMs: 1 }
          : { phase: 'Succeeded', truncated: false, stdoutBytes: 2, stderrBytes: 0, durationMs: 1 },
      });
    const results: AuditResult[] = [];
    const writer = new AuditWriter(
      op.clients,
      { capacity: 100, lingerMs: 300, maxCallsPerRecord: 3, ttlSecondsAfterFinished: 600, onResult: (r) => results.push(r) },
      pino({ level: 'silent' }),
    );
    const [sa, sb] = [`sa-${tag}`, `sb-${tag}`];
    // Interleaved as two sessions' calls arrive; the third of sa fills a record at once.
    for (const e of [call(sa, 0), call(sb, 0), call(sa, 1), call(sb, 1, true), call(sa, 2), call(sa, 3), call(sa, 4)]) expect(writer.record(e)).toBe(true);
    const bySession = async (session: string): Promise<SandboxRun[]> =>
      (
        (await k.custom.listNamespacedCustomObject({ ...api, namespace: ns, labelSelector: `${LABEL_SESSION}=${runLabelValue(session)}` })) as {
          items: SandboxRun[];
        }
      ).items.sort((x, y) => x.metadata.name.localeCompare(y.metadata.name));
    await until(async () => results.length === 7, 30_000, 'all seven calls written');
    expect(results).toEqual(Array(7).fill('written'));
    await writer.stop(1000);

    const a = await bySession(sa);
    expect(a.map((r) => [r.metadata.name, r.status?.calls?.map((c) => c.name)])).toEqual([
      [`w-${tag}-${sa}-0`, [0, 1, 2].map((i) => `w-${tag}-${sa}-${i}`)],
      [`w-${tag}-${sa}-3`, [3, 4].map((i) => `w-${tag}-${sa}-${i}`)],
    ]);
    const [b] = await bySession(sb);
    expect(b?.status).toMatchObject({ phase: 'Failed', reason: 'Exception', stdoutBytes: 2, stderrBytes: 9, durationMs: 2 });
    expect(b?.status?.calls?.map((c) => c.phase)).toEqual(['Succeeded', 'Failed']);
    for (const r of [...a, b]) {
      expect(parseSandboxRun(r).ok).toBe(true);
      expect(r?.metadata.annotations?.[ANNOTATION_EXECUTOR]).toBe(AUDIT_EXECUTOR);
      expect(r?.spec).toMatchObject({ owner: { user: 'alice' }, ttlSecondsAfterFinished: 600 });
    }
    // The operator's controller saw them: they stay as written (no replica executes or closes a record).
    await new Promise((r) => setTimeout(r, 2000));
    expect((await bySession(sa)).map((r) => [r.status?.phase, r.status?.calls?.length])).toEqual([
      ['Succeeded', 3],
      ['Succeeded', 2],
    ]);
  }, 60_000);

  // Session code can read its call's name from its kernel (the key of the call), and the record
  // waits a second or more: its user could create a SandboxRun under that name first. The writer
  // took the 409 for its own earlier attempt and wrote the call's status into the user's object.
  it('does not write a call into a SandboxRun created under its name by someone else, but into a record of its own', async () => {
    const tag = Date.now().toString(36);
    const session = `sq-${tag}`;
    const name = `squat-${tag}`;
    // As a user would with kubectl: their own code, no executor annotation (the admission policy
    // lets only the gateway set one); a session that does not exist, so no replica runs it.
    await k.custom.createNamespacedCustomObject({
      ...api,
      namespace: ns,
      body: {
        apiVersion: API_VERSION,
        kind: SANDBOXRUN_KIND,
        metadata: { name },
        spec: { owner: { user: 'alice' }, language: 'python', code: 'print("harmless")', timeoutSeconds: 1, session: `gone-${tag}` },
      },
    });
    const entry = auditEntry({
      name,
      namespace: ns,
      session,
      owner: { user: 'alice' },
      language: 'python',
      timeoutSeconds: 30,
      code: 'steal()',
      startedMs: Date.now(),
      endedMs: Date.now() + 1,
      outcome: { phase: 'Succeeded', truncated: false, stdoutBytes: 4242, stderrBytes: 0, durationMs: 1 },
    });
    const results: AuditResult[] = [];
    const writer = new AuditWriter(op.clients, { capacity: 10, lingerMs: 0, onResult: (r) => results.push(r) }, pino({ level: 'silent' }));
    expect(writer.record(entry)).toBe(true);
    await until(async () => results.length === 1, 30_000, 'the call written');
    await writer.stop(1000);
    expect(results).toEqual(['written']);

    const squatted = (await k.custom.getNamespacedCustomObject({ ...api, namespace: ns, name })) as SandboxRun;
    expect(squatted.spec.code).toBe('print("harmless")');
    expect(squatted.status?.stdoutBytes).not.toBe(4242);
    const records = (
      (await k.custom.listNamespacedCustomObject({ ...api, namespace: ns, labelSelector: `${LABEL_SESSION}=${runLabelValue(session)}` })) as {
        items: SandboxRun[];
      }
    ).items;
    expect(records).toHaveLength(1);
    const [record] = records;
    expect(record?.metadata.name).not.toBe(name);
    expect(record?.metadata.annotations?.[ANNOTATION_EXECUTOR]).toBe(AUDIT_EXECUTOR);
    expect(record?.spec.code).toBe('steal()');
    expect(record?.status).toMatchObject({ phase: 'Succeeded', stdoutBytes: 4242 });
  }, 60_000);
});

// Records count against the namespace's SandboxRun quota with every run: one user's busy sessions
// filled it, and every user's execute_code was refused until the records expired. At a user's
// cap of live records (here 2) their calls wait, gathering into one record, until one expires.
describe('audit records at a cap', () => {
  let capNs = '';
  let capOp: RunningOperator | undefined;
  let capClient: TestClient | undefined;
  beforeAll(async () => {
    capNs = await createNamespace(k, 'audit-cap');
    capOp = await startOperator(capNs, { CODEMODE_CPU_REQUEST: '10m', CODEMODE_AUDIT_MAX_RECORDS_PER_USER: '2' });
  });
  afterAll(async () => {
    await capClient?.close();
    await capOp?.stop();
    await deleteNamespace(k, capNs);
  });

  it("holds a user's calls at their cap of live records, and writes them together once one expires", async () => {
    capClient = await connect((capOp as RunningOperator).url, 'current');
    const created = await capClient.callTool('create_session', { language: 'python' });
    expect(created.isError ?? false, JSON.stringify(created.content)).toBe(false);
    const session = String(created.structuredContent?.session);
    // Each call more than the writer's linger (1 s) after the last: without a cap, a record each.
    for (let i = 0; i < 4; i++) {
      const r = await capClient.callTool('execute_code', { session, code: `x = ${i}` });
      expect(r.isError ?? false, JSON.stringify(r.content)).toBe(false);
      await new Promise((res) => setTimeout(res, 1_500));
    }
    const records = async (): Promise<SandboxRun[]> =>
      (
        (await k.custom.listNamespacedCustomObject({ ...api, namespace: capNs, labelSelector: `${LABEL_SESSION}=${runLabelValue(session)}` })) as {
          items: SandboxRun[];
        }
      ).items
        .filter((r) => r.status?.phase !== undefined)
        .sort((x, y) => String(x.spec.code).localeCompare(String(y.spec.code)));
    await until(async () => (await records()).length === 2, 20_000, 'two records');
    // The calls after them wait (not dropped, not written) while the user holds 2.
    await new Promise((res) => setTimeout(res, 3_000));
    const held = await records();
    // A record of one call has no status.calls.
    expect(held.map((r) => [r.spec.code, r.status?.calls?.length ?? 1])).toEqual([
      ['x = 0', 1],
      ['x = 1', 1],
    ]);
    // One reaches its TTL (deleted, as the controller does then): the waiting calls are written, together.
    await k.custom.deleteNamespacedCustomObject({ ...api, namespace: capNs, name: (held[0] as SandboxRun).metadata.name });
    await until(async () => (await records()).some((r) => r.spec.code === 'x = 2'), 20_000, 'the held calls written');
    const after = await records();
    expect(after.map((r) => [r.spec.code, r.status?.calls?.length ?? 1])).toEqual([
      ['x = 1', 1],
      ['x = 2', 2],
    ]);
  }, 120_000);
});
