// Per-user limits and audit records on the real cluster (issue 9), with two gateway replicas in
// one namespace and static tokens: a user reaches each limit with calls spread over both replicas
// (what one replica started counts on the other), the refusal names the limit, the use and when to
// retry, other users are unaffected; every session call leaves a finished SandboxRun (owner,
// language, outcome, duration) that no replica ever executes again.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GROUP, LABEL_OWNER, SANDBOXRUN_PLURAL, VERSION, type SandboxRun } from '../../src/api/v1alpha1/index.js';
import { ANNOTATION_EXECUTOR, AUDIT_EXECUTOR } from '../../src/api/v1alpha1/labels.js';
import { createNamespace, deleteNamespace, testKube, until } from './helpers/kube.js';
import { connect, startOperator, type RunningOperator, type TestClient, type ToolResult } from './helpers/operator.js';

const k = testKube();
const api = { group: GROUP, version: VERSION, plural: SANDBOXRUN_PLURAL };
const users = ['alice', 'bob', 'carol', 'dave'] as const;
type User = (typeof users)[number];
const tokens = Object.fromEntries(users.map((u) => [u, `t-${randomBytes(16).toString('hex')}`])) as Record<User, string>;
const LIMITS = { CODEMODE_USER_MAX_RUNS: '2', CODEMODE_USER_MAX_SESSIONS: '1', CODEMODE_USER_MAX_EXECUTIONS_PER_MINUTE: '5' };
let ns = '';
const replicas: RunningOperator[] = [];
const open: TestClient[] = [];

beforeAll(async () => {
  ns = await createNamespace(k, 'user-limits');
  const csv = users.map((u) => `${tokens[u]},${u},${u}-id`).join('\n');
  await k.core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'team-tokens' }, stringData: { 'tokens.csv': `${csv}\n` } } });
  for (let i = 0; i < 2; i++) {
    replicas.push(
      await startOperator(ns, { CODEMODE_AUTH_MODE: 'tokens', CODEMODE_AUTH_TOKENS_SECRET: 'team-tokens', CODEMODE_CPU_REQUEST: '10m', ...LIMITS }),
    );
  }
});
afterAll(async () => {
  for (const c of open) await c.close().catch(() => undefined);
  for (const r of replicas) await r.stop();
  await deleteNamespace(k, ns);
});

/** A client of `user` on replica `i` (0 or 1). */
async function client(user: User, i: number): Promise<TestClient> {
  const c = await connect((replicas[i] as RunningOperator).url, 'current', { authorization: `Bearer ${tokens[user]}` });
  open.push(c);
  return c;
}

const text = (r: ToolResult): string => r.content.map((c) => c.text ?? '').join('\n');

async function ok(c: TestClient, tool: string, args: Record<string, unknown>): Promise<ToolResult> {
  const r = await c.callTool(tool, args);
  expect(r.isError ?? false, `${tool}: ${text(r)}`).toBe(false);
  return r;
}

async function listRuns(): Promise<SandboxRun[]> {
  return ((await k.custom.listNamespacedCustomObject({ ...api, namespace: ns })) as { items: SandboxRun[] }).items;
}

type Meta = { metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> }; status?: unknown };
const ownedBy =
  (user: string) =>
  (r: Meta): boolean =>
    r.metadata?.labels?.[LABEL_OWNER] === user;
const isAudit = (r: Meta): boolean => r.metadata?.annotations?.[ANNOTATION_EXECUTOR] === AUDIT_EXECUTOR;
const terminal = (r: Meta): boolean => ['Succeeded', 'Failed', 'TimedOut'].includes(String((r.status as { phase?: string } | undefined)?.phase));

/** The session calls an audit record covers: those it lists (status.calls), or itself. */
const callsOf = (r: Meta & { metadata?: { name?: string } }): Array<{ name?: string; phase?: string; reason?: string }> =>
  (r.status as { calls?: Array<{ name?: string }> } | undefined)?.calls ?? [{ name: r.metadata?.name, ...(r.status as object) }];

/** Until both replicas' caches show finished audit records of `n` session calls of `user`. */
async function recordsSeenEverywhere(user: string, n: number): Promise<void> {
  for (const r of replicas) {
    await until(
      () =>
        r.operator.runCache
          .list()
          .filter((o) => ownedBy(user)(o) && isAudit(o) && terminal(o))
          .flatMap(callsOf).length >= n,
      60_000,
      `audit records of ${n} calls of ${user} in a replica's cache`,
    );
  }
}

describe('per-user limits across two replicas', () => {
  it('refuses a third concurrent run wherever it arrives, and not another user', async () => {
    const [a0, a1, b1] = [await client('alice', 0), await client('alice', 1), await client('bob', 1)];
    // One long run through each replica; not awaited: they hold the two slots.
    const long = [a0, a1].map((c) => c.callTool('execute_code', { code: 'import time; time.sleep(20)', timeout_seconds: 60 }));
    await until(async () => (await listRuns()).filter((r) => ownedBy('alice')(r) && !isAudit(r)).length >= 2, 60_000, "alice's two runs created");
    for (const r of replicas)
      await until(() => r.operator.runCache.list().filter((o) => ownedBy('alice')(o) && !isAudit(o)).length >= 2, 30_000, "alice's runs in both caches");
    for (const c of [a0, a1]) {
      const refused = await c.callTool('execute_code', { code: 'print(1)' });
      expect(refused.isError).toBe(true);
      expect(text(refused)).toMatch(
        /refused for your per-user limit \(user_runs\): you have 2 of 2 runs executing across all gateway replicas \(CODEMODE_USER_MAX_RUNS\)[\s\S]*Retry in \d+ seconds/,
      );
    }
    const bobs = await ok(b1, 'execute_code', { code: 'print("bob runs")' });
    expect(text(bobs)).toContain('bob runs');
    // A transient run is its own audit record: who, when, language, outcome, duration.
    const name = String(bobs.structuredContent?.run);
    await until(async () => (await listRuns()).some((r) => r.metadata.name === name && r.status?.completionTime !== undefined), 30_000, "bob's run recorded");
    const record = (await listRuns()).find((r) => r.metadata.name === name);
    expect(record?.spec).toMatchObject({ owner: { user: 'bob' }, language: 'python' });
    expect(record?.status).toMatchObject({ phase: 'Succeeded', exitCode: 0 });
    expect(record?.status?.startTime).toBeDefined();
    expect(record?.status?.durationMs).toBeGreaterThanOrEqual(0);
    for (const r of await Promise.all(long)) expect(r.isError ?? false, text(r)).toBe(false);
  });

  it('refuses a second live session on the other replica, and not another user', async () => {
    const [c0, c1, b1] = [await client('carol', 0), await client('carol', 1), await client('bob', 1)];
    const first = await ok(c0, 'create_session', { language: 'python' });
    const refused = await c1.callTool('create_session', { language: 'python' });
    expect(refused.isError).toBe(true);
    expect(text(refused)).toMatch(
      /refused for your per-user limit \(user_sessions\): you have 1 of 1 sessions live across all gateway replicas \(CODEMODE_USER_MAX_SESSIONS\)[\s\S]*close_session[\s\S]*retry in \d+ seconds/,
    );
    await ok(b1, 'create_session', { language: 'python' });
    // Closing frees the unit for the user.
    await ok(c1, 'close_session', { session: first.structuredContent?.session });
    await until(async () => !(await c1.callTool('create_session', { language: 'python' })).isError, 60_000, "carol's session after closing hers");
  });

  it('counts executions per minute over both replicas from the audit records, records each session call, and never runs a record again', async () => {
    const [d0, d1, b0] = [await client('dave', 0), await client('dave', 1), await client('bob', 0)];
    const created = await ok(d0, 'create_session', { language: 'python' });
    const session = String(created.structuredContent?.session);
    const calls = ['n = 0', 'n += 1', 'raise ValueError("expected")', 'n += 1', 'n'];
    const results: ToolResult[] = [];
    for (const [i, code] of calls.entries()) results.push(await (i % 2 === 0 ? d0 : d1).callTool('execute_code', { session, code }));
    expect(results[4]?.structuredContent?.result).toBe('2');

    await recordsSeenEverywhere('dave', 5);
    // Each replica writes the calls it served in records of its own (several calls of a session
    // to one record when they come within a second): five calls, each listed once.
    const records = (await listRuns()).filter((r) => ownedBy('dave')(r) && isAudit(r));
    const recorded = records.flatMap(callsOf);
    expect(new Set(recorded.map((c) => c.name)).size).toBe(5);
    expect(recorded).toHaveLength(5);
    for (const r of records) {
      expect(r.spec).toMatchObject({ owner: { user: 'dave' }, language: 'python', session, ttlSecondsAfterFinished: 600 });
      expect(r.status?.startTime).toBeDefined();
      expect(r.status?.completionTime).toBeDefined();
      expect(r.status?.durationMs).toBeGreaterThanOrEqual(0);
      expect(r.status?.stdout).toBeUndefined();
    }
    const phases = recorded.map((c) => `${c.phase}/${c.reason ?? ''}`).sort();
    expect(phases).toEqual(['Failed/Exception', 'Succeeded/', 'Succeeded/', 'Succeeded/', 'Succeeded/']);

    // Five in the last minute, seen by both replicas: the sixth is refused on either.
    for (const c of [d0, d1]) {
      const refused = await c.callTool('execute_code', { session, code: 'n' });
      expect(refused.isError).toBe(true);
      expect(text(refused)).toMatch(
        /refused for your per-user limit \(user_executions_per_minute\): you started 5 of 5 executions in the last 60 seconds across all gateway replicas \(CODEMODE_USER_MAX_EXECUTIONS_PER_MINUTE\)[\s\S]*Retry in \d+ seconds/,
      );
    }

    // Bob is unaffected; his records are finished before his last call: had any replica executed
    // one of them again, n would be more than 2.
    // His session from the test above (created through the other replica), or a new one.
    const listed = (await ok(b0, 'list_sessions', {})).structuredContent as { sessions: Array<{ session: string }> };
    const bobSession = listed.sessions[0]?.session ?? String((await ok(b0, 'create_session', { language: 'python' })).structuredContent?.session);
    for (const code of ['n = 0', 'n += 1', 'n += 1']) await ok(b0, 'execute_code', { session: bobSession, code });
    await recordsSeenEverywhere('bob', 3);
    await new Promise((r) => setTimeout(r, 2000));
    expect((await ok(b0, 'execute_code', { session: bobSession, code: 'n' })).structuredContent?.result).toBe('2');
  });
});
