// Any replica serves any request (issue 9): two gateway processes behind one address that
// alternates requests between them, one MCP client per protocol era using one session across
// both, one replica stopped mid-way; the clients go on through the other and nothing is lost —
// the session's variables and files are intact. Works because no MCP transport state lives in a
// process (a fresh McpServer per HTTP request, src/gateway/app.ts) and sessions are found through
// the SandboxSession objects every replica watches.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNamespace, deleteNamespace, testKube } from './helpers/kube.js';
import { connect, startOperator, type RunningOperator, type TestClient, type ToolResult } from './helpers/operator.js';
import { startRoundRobin, type RoundRobin } from './helpers/round-robin.js';

const k = testKube();
let ns = '';
let r1: RunningOperator;
let r2: RunningOperator | undefined;
let proxy: RoundRobin;
const clients: TestClient[] = [];

beforeAll(async () => {
  ns = await createNamespace(k, 'any-replica');
  r1 = await startOperator(ns, { CODEMODE_CPU_REQUEST: '10m' });
  r2 = await startOperator(ns, { CODEMODE_CPU_REQUEST: '10m' });
  proxy = await startRoundRobin([r1.url, r2.url]);
});
afterAll(async () => {
  for (const c of clients) await c.close().catch(() => undefined);
  await proxy?.close();
  await r2?.stop();
  await r1?.stop();
  await deleteNamespace(k, ns);
});

const text = (r: ToolResult): string => r.content.map((c) => c.text ?? '').join('\n');

async function ok(c: TestClient, tool: string, args: Record<string, unknown>): Promise<ToolResult> {
  const r = await c.callTool(tool, args);
  expect(r.isError ?? false, `${c.era} ${tool}: ${text(r)}`).toBe(false);
  return r;
}

describe('any replica serves any request', () => {
  it('keeps one session working across two replicas, and through the survivor after one is stopped', async () => {
    for (const era of ['current', '2025'] as const) clients.push(await connect(proxy.url, era));
    const sessions = new Map<TestClient, string>();
    for (const c of clients) {
      const created = await ok(c, 'create_session', { language: 'python' });
      sessions.set(c, String(created.structuredContent?.session));
    }
    // Several calls each, alternating replicas: state and files built up across both.
    for (const c of clients) {
      const session = sessions.get(c);
      await ok(c, 'execute_code', { session, code: 'total = 0' });
      for (let i = 1; i <= 3; i++) await ok(c, 'execute_code', { session, code: `total += ${i}` });
      await ok(c, 'write_file', { session, path: 'notes/a.txt', content: `written by ${c.era}` });
      await ok(c, 'execute_code', { session, code: "open('/workspace/notes/b.txt', 'w').write(str(total))" });
    }
    const before = [...proxy.served];
    expect(
      before.every((n) => n > 0),
      `both replicas served requests: ${before.join(', ')}`,
    ).toBe(true);

    // One replica goes away mid-way (its listener and its operator stop, as on a killed pod that
    // the Service stops routing to).
    const gone = r2;
    r2 = undefined;
    await gone?.stop();

    for (const c of clients) {
      const session = sessions.get(c);
      const r = await ok(c, 'execute_code', { session, code: 'total += 4\ntotal' });
      expect(r.structuredContent?.result).toBe('10');
      const a = await ok(c, 'read_file', { session, path: 'notes/a.txt' });
      expect(text(a)).toContain(`written by ${c.era}`);
      const b = await ok(c, 'read_file', { session, path: 'notes/b.txt' });
      expect(text(b)).toContain('6');
      const listed = await ok(c, 'list_sessions', {});
      expect(JSON.stringify(listed.structuredContent)).toContain(String(session));
      await ok(c, 'close_session', { session });
    }
    // The survivor served everything after the stop.
    expect(proxy.served[0]).toBeGreaterThan(before[0] ?? 0);
  });
});
