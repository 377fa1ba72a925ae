// A call to a session that is still starting waits for it instead of failing: `kubectl apply` of a
// SandboxSession and a SandboxRun in it, or an agent calling a session created a moment ago, runs
// once the session is ready (each call once). A session that never becomes ready ends the waiting
// call with the session's own reason (a SandboxRun records it). Before, both failed at once with "still starting" (the
// SandboxRun as KernelLost).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  API_VERSION,
  GROUP,
  SANDBOXPROFILE_PLURAL,
  SANDBOXRUN_KIND,
  SANDBOXRUN_PLURAL,
  SANDBOXSESSION_KIND,
  SANDBOXSESSION_PLURAL,
  VERSION,
  isTerminalPhase,
  type SandboxRun,
  type SandboxSession,
} from '../../src/api/v1alpha1/index.js';
import { SANDBOX_IMAGE, createNamespace, deleteNamespace, testKube, until } from './helpers/kube.js';
import { connect, startOperator, type RunningOperator, type TestClient, type ToolResult } from './helpers/operator.js';

/** How long a pod may take to start here, and so how long a call waits for a session to start. */
const STARTUP_SECONDS = 12;

const k = testKube();
let ns = '';
let op: RunningOperator;
let mcp: TestClient;
const api = { group: GROUP, version: VERSION };
const sc = (r: ToolResult): Record<string, unknown> => r.structuredContent ?? {};
const text = (r: ToolResult): string => r.content.map((c) => c.text ?? '').join('\n');

beforeAll(async () => {
  ns = await createNamespace(k, 'sess-start');
  // No warm pool (the e2e default): a session's pod is created when the session is, so it is
  // still starting for a second or more.
  op = await startOperator(ns, { CODEMODE_POD_STARTUP_TIMEOUT_SECONDS: String(STARTUP_SECONDS) });
  mcp = await connect(op.url, 'current');
  await k.custom.createNamespacedCustomObject({
    ...api,
    namespace: ns,
    plural: SANDBOXPROFILE_PLURAL,
    body: {
      apiVersion: API_VERSION,
      kind: 'SandboxProfile',
      metadata: { name: 'nowhere' },
      spec: { image: SANDBOX_IMAGE, nodeSelector: { 'codemode.dev/test-pool': 'absent' } },
    },
  });
}, 120_000);
afterAll(async () => {
  await mcp?.close();
  await op?.stop();
  await deleteNamespace(k, ns);
});

/** A SandboxSession as `kubectl apply` creates it. */
async function applySession(name: string, profile?: string): Promise<void> {
  await k.custom.createNamespacedCustomObject({
    ...api,
    namespace: ns,
    plural: SANDBOXSESSION_PLURAL,
    body: { apiVersion: API_VERSION, kind: SANDBOXSESSION_KIND, metadata: { name }, spec: { language: 'python', ...(profile && { profile }) } },
  });
}

async function sessionPhase(name: string): Promise<string | undefined> {
  return ((await k.custom.getNamespacedCustomObject({ ...api, namespace: ns, plural: SANDBOXSESSION_PLURAL, name })) as SandboxSession).status?.phase;
}

/** A SandboxRun in the session as `kubectl apply` creates it; resolves with its terminal status. */
async function applyRun(session: string, code: string): Promise<NonNullable<SandboxRun['status']>> {
  const body = {
    apiVersion: API_VERSION,
    kind: SANDBOXRUN_KIND,
    metadata: { generateName: 'in-starting-' },
    spec: { session, language: 'python', code, timeoutSeconds: 30 },
  };
  const name = String(((await k.custom.createNamespacedCustomObject({ ...api, namespace: ns, plural: SANDBOXRUN_PLURAL, body })) as SandboxRun).metadata.name);
  let status: SandboxRun['status'];
  await until(
    async () => {
      status = ((await k.custom.getNamespacedCustomObject({ ...api, namespace: ns, plural: SANDBOXRUN_PLURAL, name })) as SandboxRun).status;
      return isTerminalPhase(status?.phase);
    },
    60_000,
    `SandboxRun ${name} to finish`,
  );
  return status ?? {};
}

describe('a call to a session that is still starting', () => {
  it('waits for it: a SandboxRun applied with its session and an agent call both run, once each', async () => {
    await applySession('applied');
    const [run, viaMcp] = await Promise.all([
      applyRun('applied', 'import os\ncalls = globals().get("calls", [])\ncalls.append("run")\nprint(os.getpid())'),
      (async () => {
        // Still starting when the call arrives: its pod was created a moment ago.
        expect(await sessionPhase('applied')).not.toBe('Ready');
        return mcp.callTool('execute_code', { session: 'applied', code: 'calls = globals().get("calls", [])\ncalls.append("mcp")\nlen(calls)' });
      })(),
    ]);
    expect(run, JSON.stringify(run)).toMatchObject({ phase: 'Succeeded' });
    expect(sc(viaMcp), text(viaMcp)).toMatchObject({ phase: 'Succeeded' });
    // Both ran in the one interpreter, once each (in whichever order they got their turns).
    const after = await mcp.callTool('execute_code', { session: 'applied', code: 'sorted(calls)' });
    expect(sc(after).result).toBe("['mcp', 'run']");
  }, 120_000);

  it("ends with the session's own reason when it never becomes ready, after waiting for it", async () => {
    await applySession('stuck', 'nowhere');
    const asked = Date.now();
    const r = await mcp.callTool('execute_code', { session: 'stuck', code: 'print(1)' });
    const waited = Date.now() - asked;
    expect(r.isError, text(r)).toBe(true);
    // The session failed at its start-up deadline while the call waited for it (the call's own
    // allowance, counted from later, had not run out).
    expect(text(r)).toMatch(/^Session stuck is failed: .*(schedul|node)/i);
    expect(waited).toBeGreaterThan((STARTUP_SECONDS - 2) * 1000);
    expect(await sessionPhase('stuck')).toBe('Failed');
    // A SandboxRun in it records the session's reason, not a lost interpreter.
    const run = await applyRun('stuck', 'print(1)');
    expect(run, JSON.stringify(run)).toMatchObject({ phase: 'Failed', reason: 'Unschedulable' });
    expect(run.message).toMatch(/^Session stuck is failed: /);
  }, 120_000);
});
