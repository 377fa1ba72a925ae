// Persistent sessions, idle garbage collection, the warm pool and workspace files, end to end on
// the real cluster through MCP clients.
import { Watch, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GROUP, SANDBOXSESSION_PLURAL, VERSION } from '../../src/api/v1alpha1/index.js';
import { createNamespace, deleteNamespace, readyPoolPods, testKube, until } from './helpers/kube.js';
import { connect, startOperator, type RunningOperator, type TestClient, type ToolResult } from './helpers/operator.js';

const k = testKube();
let ns = '';
let op: RunningOperator;
let mcp: TestClient;
// A maximum idle timeout below the CRD's default (600): sessions made without one still start.
const ENV = { CODEMODE_WARM_POOL_SIZE: '2', CODEMODE_SESSION_MAX_IDLE_TIMEOUT_SECONDS: '300' };

beforeAll(async () => {
  ns = await createNamespace(k, 'sessions');
  op = await startOperator(ns, ENV);
  mcp = await connect(op.url, 'current');
});
afterAll(async () => {
  await mcp?.close();
  await op?.stop();
  await deleteNamespace(k, ns);
});

const sc = (r: ToolResult): Record<string, unknown> => r.structuredContent ?? {};

async function newSession(language = 'python', extra: Record<string, unknown> = {}): Promise<string> {
  const r = await mcp.callTool('create_session', { language, ...extra });
  expect(r.isError ?? false, JSON.stringify(r.content)).toBe(false);
  expect(sc(r)).toMatchObject({ phase: 'Ready', language });
  return String(sc(r).session);
}

const run = (session: string, code: string, extra: Record<string, unknown> = {}): Promise<ToolResult> =>
  mcp.callTool('execute_code', { code, session, ...extra });

describe('sessions', () => {
  it('keeps variables, imports and functions between calls, and returns the last expression', async () => {
    const s = await newSession();
    expect(sc(await run(s, 'import math\nx = 41\ndef inc(v):\n    return v + 1'))).toMatchObject({ phase: 'Succeeded', session: s });
    const r = await run(s, 'print(math.floor(2.5))\ninc(x)');
    expect(sc(r)).toMatchObject({ phase: 'Succeeded', stdout: '2\n', result: '42' });
    const err = await run(s, 'undefined_name + 1');
    expect(err.isError ?? false).toBe(false);
    expect(sc(err)).toMatchObject({ phase: 'Failed', reason: 'Exception' });
    expect(String(sc(err).stderr)).toContain('NameError');
    expect(sc(await run(s, 'x'))).toMatchObject({ result: '41' });
  });

  it("gives a session made without idle_timeout_seconds the administrator's maximum when it is below the default", async () => {
    const s = await newSession();
    const created = (await k.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: SANDBOXSESSION_PLURAL, name: s })) as {
      spec: { idleTimeoutSeconds: number };
    };
    expect(created.spec.idleTimeoutSeconds).toBe(300);
    const over = await mcp.callTool('create_session', { language: 'python', idle_timeout_seconds: 301 });
    expect(over.isError).toBe(true);
    expect(over.content[0]?.text).toContain('idle_timeout_seconds=301 is above the maximum of 300');
  });

  it('isolates two sessions from each other', async () => {
    const [a, b] = await Promise.all([newSession(), newSession()]);
    await run(a, 'secret = "only-in-a"');
    const r = await run(b, 'print("secret" in globals())');
    expect(sc(r)).toMatchObject({ stdout: 'False\n' });
  });

  it('interrupts a call at its timeout and keeps the session usable', async () => {
    const s = await newSession();
    await run(s, 'kept = 7');
    const r = await run(s, 'while True: pass', { timeout_seconds: 2 });
    expect(r.isError).toBe(true);
    expect(sc(r)).toMatchObject({ phase: 'TimedOut' });
    expect(sc(await run(s, 'kept * 6'))).toMatchObject({ phase: 'Succeeded', result: '42' });
  });

  it('persists the working directory and exported variables in bash sessions', async () => {
    const s = await newSession('bash');
    await run(s, 'mkdir -p /workspace/sub && cd /workspace/sub && export GREETING=hi', { language: 'bash' });
    const r = await run(s, 'echo "$GREETING from $(pwd)"', { language: 'bash' });
    expect(sc(r)).toMatchObject({ phase: 'Succeeded', stdout: 'hi from /workspace/sub\n' });
  });

  it('round-trips text and binary files and refuses paths outside /workspace', async () => {
    const s = await newSession();
    const w = await mcp.callTool('write_file', { session: s, path: 'data/notes.txt', content: 'héllo\n' });
    expect(sc(w)).toMatchObject({ size: 7 });
    expect(sc(await mcp.callTool('read_file', { session: s, path: 'data/notes.txt' }))).toMatchObject({ content: 'héllo\n' });
    const bytes = Buffer.from([0, 1, 2, 250, 255]);
    await mcp.callTool('write_file', { session: s, path: '/workspace/bin.dat', content: bytes.toString('base64'), encoding: 'base64' });
    expect(sc(await mcp.callTool('read_file', { session: s, path: 'bin.dat', encoding: 'base64' }))).toMatchObject({
      content: bytes.toString('base64'),
      size: 5,
    });
    expect(sc(await run(s, 'open("/workspace/data/notes.txt").read()'))).toMatchObject({ result: "'héllo\\n'" });
    const list = sc(await mcp.callTool('list_files', { session: s }));
    expect(list.entries).toEqual(
      expect.arrayContaining([{ name: 'bin.dat', type: 'file', size: 5 }, expect.objectContaining({ name: 'data', type: 'directory' })]),
    );

    // Names are exact: a file the program names with a trailing space is listed and read by that
    // name, and the name without the space is another (missing) file.
    await run(s, 'open("/workspace/notes ", "w").write("spaced")');
    expect((sc(await mcp.callTool('list_files', { session: s })).entries as { name: string }[]).map((e) => e.name)).toContain('notes ');
    expect(sc(await mcp.callTool('read_file', { session: s, path: 'notes ' }))).toMatchObject({ content: 'spaced' });
    expect((await mcp.callTool('read_file', { session: s, path: 'notes' })).isError).toBe(true);

    for (const path of ['../etc/passwd', '/etc/passwd', 'a/../../x']) {
      const r = await mcp.callTool('read_file', { session: s, path });
      expect(r.isError, path).toBe(true);
      expect(r.content[0]?.text).toMatch(/workspace/);
    }
    await run(s, 'import os\nos.symlink("/etc", "/workspace/escape")');
    const viaLink = await mcp.callTool('read_file', { session: s, path: 'escape/passwd' });
    expect(viaLink.isError).toBe(true);
    expect(viaLink.content[0]?.text).toMatch(/outside \/workspace/);
    const writeViaLink = await mcp.callTool('write_file', { session: s, path: 'escape/evil', content: 'x' });
    expect(writeViaLink.isError).toBe(true);
    // A large write to a refused path is refused with its reason. (The helper reads its stdin to
    // the end first, files-script.test.ts: with 1 MiB unread this call waited out the exec's
    // 30 s watchdog, which this test cannot tell apart without a clock.)
    const toDir = await mcp.callTool('write_file', { session: s, path: 'data', content: 'x'.repeat(1024 * 1024) });
    expect(toDir.isError).toBe(true);
    expect(toDir.content[0]?.text).toMatch(/data is a directory/);
  });

  it('lists and closes sessions; a closed session says so', async () => {
    const s = await newSession();
    const listed = sc(await mcp.callTool('list_sessions', {})).sessions as Array<{ session: string }>;
    expect(listed.map((x) => x.session)).toContain(s);
    expect(sc(await mcp.callTool('close_session', { session: s }))).toMatchObject({ closed: true });
    const r = await run(s, 'print(1)');
    expect(r.isError).toBe(true);
    expect(r.content[0]?.text).toMatch(/no session|create_session/);
  });

  it('tells a call whose session was closed under it that the session was deleted, not that its interpreter died', async () => {
    const s = await newSession();
    const call = run(s, 'import time\ntime.sleep(30)', { timeout_seconds: 60 });
    // The call is running (its activity is recorded) before another client closes the session.
    await new Promise((r) => setTimeout(r, 3000));
    const other = await connect(op.url, 'current');
    try {
      expect(sc(await other.callTool('close_session', { session: s }))).toMatchObject({ closed: true });
    } finally {
      await other.close();
    }
    const r = await call;
    expect(r.isError).toBe(true);
    expect(r.content[0]?.text).toMatch(new RegExp(`^Session ${s} was deleted during this call`));
  });
});

describe('idle garbage collection', () => {
  it('keeps a session whose call runs longer than its idle timeout', async () => {
    const s = await newSession('python', { idle_timeout_seconds: 10 });
    // The controller sees no call, only lastActivityTime: the call renews it while it runs.
    const r = await run(s, 'import time\ntime.sleep(25)\n6 * 7', { timeout_seconds: 60 });
    expect(r.isError ?? false, JSON.stringify(r.content)).toBe(false);
    expect(sc(r), JSON.stringify(r.content)).toMatchObject({ result: '42' });
    const again = await run(s, '1 + 1');
    expect(sc(again), JSON.stringify(again.content)).toMatchObject({ result: '2' });
  });

  it('collects an idle session and its pod, even across a gateway restart', async () => {
    const s = await newSession('python', { idle_timeout_seconds: 12 });
    await run(s, 'y = 1');
    const get = (): Promise<unknown> =>
      k.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: SANDBOXSESSION_PLURAL, name: s }).catch(() => undefined);
    const session = (await get()) as { status: { podName: string; lastActivityTime?: string } };
    const podName = session.status.podName;
    await until(
      async () => ((await get()) as { status: { lastActivityTime?: string } }).status.lastActivityTime !== undefined,
      10_000,
      'activity recorded in status',
    );
    // Restart the gateway: the session still works, and is still collected later.
    await mcp.close();
    await op.stop();
    op = await startOperator(ns, ENV);
    mcp = await connect(op.url, 'current');
    const after = await run(s, 'y + 1');
    expect(sc(after), JSON.stringify(after.content)).toMatchObject({ result: '2' });
    await until(async () => (await get()) === undefined, 60_000, 'the idle session to be deleted');
    await until(
      async () =>
        !(await k.core.readNamespacedPod({ namespace: ns, name: podName }).then(
          () => true,
          () => false,
        )),
      60_000,
      'its pod to be deleted',
    );
  });
});

describe('warm pool', () => {
  it('starts the replacement for a claimed pod when the run in it has ended, while a ready pod is left', async () => {
    const ns2 = await createNamespace(k, 'refill');
    // Every pool pod that ever exists, from a watch opened before the operator starts.
    const created = new Set<string>();
    const watch = await new Watch(k.kc).watch(
      `/api/v1/namespaces/${ns2}/pods`,
      {},
      (type: string, pod: V1Pod) => {
        if (type === 'ADDED' && pod.metadata?.name?.startsWith('codemode-pool-')) created.add(pod.metadata.name);
      },
      () => undefined,
    );
    // No reserved pod (warm-pool.test.ts covers it): it would take a ready pod after the run and
    // add a fourth pod to the three this test counts.
    const op2 = await startOperator(ns2, { CODEMODE_WARM_POOL_SIZE: '2', CODEMODE_WARM_POOL_REFILL_DEFER_MS: '10000', CODEMODE_WARM_POOL_RESERVE: '0' });
    try {
      const pool = async (): Promise<{ warm: number; ready: number }> => {
        const pods = (await k.core.listNamespacedPod({ namespace: ns2, labelSelector: 'codemode.dev/pool=warm' })).items.filter(
          (p) => !p.metadata?.deletionTimestamp,
        );
        return { warm: pods.length, ready: pods.filter((p) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')).length };
      };
      await until(async () => (await pool()).ready === 2, 120_000, 'the pool to fill');
      const client = await connect(op2.url, 'current');
      const call = client.callTool('execute_code', { code: 'import socket, time\nprint(socket.gethostname())\ntime.sleep(4)' });
      await until(async () => (await pool()).warm === 1, 10_000, 'the run to claim a pool pod');
      // The run is executing and a ready pod is left: no replacement yet (the deferral is 10 s).
      await new Promise((r) => setTimeout(r, 2000));
      expect(await pool()).toEqual({ warm: 1, ready: 1 });
      const r = await call;
      await client.close();
      expect(sc(r)).toMatchObject({ phase: 'Succeeded' });
      expect(String(sc(r).stdout)).toMatch(/^codemode-pool-/);
      // The run ended and its pod was deleted: the replacement is created now, well before 10 s.
      await until(async () => (await pool()).warm === 2, 5_000, 'the replacement pod to be created after the run');
      // Exactly three pool pods ever existed (two to fill, one replacement).
      await until(async () => (await pool()).ready === 2, 60_000, 'the replacement to be ready');
      expect(created.size).toBe(3);
    } finally {
      watch.abort();
      await op2.stop();
      await deleteNamespace(k, ns2);
    }
  });

  it('runs 20 parallel runs against a pool of 5: 20 distinct pods, none stuck, pool refilled', async () => {
    const ns2 = await createNamespace(k, 'pool');
    const op2 = await startOperator(ns2, { CODEMODE_WARM_POOL_SIZE: '5' });
    try {
      await until(async () => (await readyPoolPods(k, ns2)).length === 5, 120_000, 'the pool to fill');
      const clients = await Promise.all(Array.from({ length: 4 }, () => connect(op2.url, 'current')));
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          (clients[i % 4] as TestClient).callTool('execute_code', { code: 'import socket\nprint(socket.gethostname())', timeout_seconds: 60 }),
        ),
      );
      await Promise.all(clients.map((c) => c.close()));
      const hosts = results.map((r) => String(sc(r).stdout).trim());
      // Every run succeeded; the failures (with their reasons) are the message when one did not.
      const failed = results.filter((r) => sc(r).phase !== 'Succeeded');
      expect(failed.map((r) => `${String(sc(r).phase)} ${String(sc(r).reason)} ${String(sc(r).stderr)} ${JSON.stringify(r.content)}`)).toEqual([]);
      expect(new Set(hosts).size).toBe(20);
      expect(hosts.filter((h) => h.startsWith('codemode-pool-')).length).toBeGreaterThanOrEqual(5);
      await until(async () => (await readyPoolPods(k, ns2)).length === 5, 120_000, 'the pool to refill');
    } finally {
      await op2.stop();
      await deleteNamespace(k, ns2);
    }
  });
});
