// The operator's sandbox self-check on the real cluster: a canary sandbox reports from the inside
// that every protection is enforced (kubelet podPidsLimit, memory cgroup, read-only root, no token,
// kube-router + the deny-all NetworkPolicy). Then an allow-all NetworkPolicy (policies are
// additive) opens the network: the check must see it at once (the policy's creation starts one),
// the gateway must refuse code with a clear
// error (tools and kubectl-created runs), and CODEMODE_ACCEPT_UNENFORCED=network must let code
// run while the metric still says 0.
import type { V1NetworkPolicy } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GROUP, SANDBOXRUN_PLURAL, SANDBOXSESSION_PLURAL, VERSION } from '../../src/api/v1alpha1/index.js';
import { LABEL_SELFCHECK } from '../../src/sandbox/pod.js';
import type { SandboxCheckState } from '../../src/selfcheck/checker.js';
import { createNamespace, deleteNamespace, testKube, until } from './helpers/kube.js';
import { connect, startOperator, type RunningOperator } from './helpers/operator.js';

const k = testKube();
const ALLOW_ALL = 'test-allow-all';
const CHECK_WAIT_MS = 480_000;
const TEST_TIMEOUT_MS = 600_000;
let ns = '';
let op: RunningOperator | undefined;

beforeAll(async () => {
  ns = await createNamespace(k, 'sandboxcheck');
});
afterAll(async () => {
  await op?.stop();
  // The allow-all policy goes first, whatever happened: it must never outlive this test.
  await k.networking.deleteNamespacedNetworkPolicy({ namespace: ns, name: ALLOW_ALL }).catch(() => undefined);
  await deleteNamespace(k, ns);
});

async function start(env: Record<string, string> = {}): Promise<RunningOperator> {
  await op?.stop();
  op = await startOperator(ns, env, { sandboxCheck: true });
  const check = op.operator.sandboxCheck;
  // On a busy shared node the canary can wait for CPU to be scheduled; a check whose pod did not
  // start is retried (every 30 s), so wait for a completed one.
  await until(() => check?.status.kind === 'checked', CHECK_WAIT_MS, 'a completed sandbox check');
  return op;
}

function enforced(state: SandboxCheckState | undefined): Record<string, boolean> {
  return state?.kind === 'checked' ? Object.fromEntries(state.results.map((r) => [r.check, r.enforced])) : {};
}

function describeState(state: SandboxCheckState | undefined): string {
  return JSON.stringify(state, null, 1);
}

async function metricsText(o: RunningOperator): Promise<string> {
  return (await o.metrics?.registry.metrics()) ?? '';
}

async function readyz(o: RunningOperator): Promise<number> {
  return (await fetch(o.url.replace(/\/mcp$/, '/readyz'))).status;
}

async function selfcheckPods(): Promise<number> {
  return (await k.core.listNamespacedPod({ namespace: ns, labelSelector: LABEL_SELFCHECK })).items.length;
}

const allowAll: V1NetworkPolicy = {
  metadata: { name: ALLOW_ALL },
  spec: { podSelector: {}, policyTypes: ['Ingress', 'Egress'], ingress: [{}], egress: [{}] },
};

describe('sandbox self-check', () => {
  it(
    'finds every protection enforced in the test cluster, and code runs',
    async () => {
      const t0 = Date.now();
      const o = await start();
      console.log(`first check after ${Date.now() - t0} ms`);
      const state = o.operator.sandboxCheck?.status;
      // The details (pids.max, which targets were silent) are in the failure message.
      expect(enforced(state), describeState(state)).toEqual({
        process_limit: true,
        memory_limit: true,
        readonly_root: true,
        no_service_account_token: true,
        network: true,
      });
      const pids = state?.kind === 'checked' ? state.results.find((r) => r.check === 'process_limit')?.detail : '';
      console.log(`process_limit: ${pids}`);
      expect(await readyz(o)).toBe(200);
      const metrics = await metricsText(o);
      expect(metrics).toMatch(/codemode_sandbox_check_enforced\{check="network"\} 1/);
      expect(metrics).toMatch(/codemode_sandbox_check_last_success_timestamp_seconds \d/);

      const mcp = await connect(o.url, 'current');
      const r = await mcp.callTool('execute_code', { code: 'print(6 * 7)' });
      await mcp.close();
      console.log(`code ran after ${Date.now() - t0} ms`);
      expect(r.structuredContent).toMatchObject({ phase: 'Succeeded', stdout: '42\n' });
      // The canary and the echo pod are gone after each check.
      await until(async () => (await selfcheckPods()) === 0, 60_000, 'the check pods to be deleted');
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'sees an allow-all NetworkPolicy and refuses code with a clear error',
    async () => {
      const o = op as RunningOperator;
      await k.networking.createNamespacedNetworkPolicy({ namespace: ns, body: allowAll });
      // The new policy starts a check by itself (src/selfcheck/policy-changes.ts; the periodic one
      // is 10 minutes away): nothing here asks for one.
      const asked = Date.now();
      await until(async () => enforced(o.operator.sandboxCheck?.status).network === false, 150_000, 'the check the new policy started to see the open network');
      console.log(`open network seen ${Date.now() - asked} ms after the policy was created`);
      const state = o.operator.sandboxCheck?.status;
      expect(enforced(state), describeState(state)).toMatchObject({ process_limit: true, readonly_root: true, network: false });
      const detail = state?.kind === 'checked' ? state.results.find((r) => r.check === 'network')?.detail : '';
      expect(detail).toMatch(/exchanged data with .*pod_ip/);
      expect(await readyz(o)).toBe(503);
      expect(await metricsText(o)).toMatch(/codemode_sandbox_check_enforced\{check="network"\} 0/);

      const mcp = await connect(o.url, 'current');
      const run = await mcp.callTool('execute_code', { code: 'print(1)' });
      const session = await mcp.callTool('create_session', { language: 'python' });
      await mcp.close();
      for (const r of [run, session]) {
        expect(r.isError).toBe(true);
        expect(r.content[0]?.text).toMatch(/does not enforce: network \(network isolation\)/);
        expect(r.content[0]?.text).toContain('CODEMODE_ACCEPT_UNENFORCED=network');
      }

      // A run created with kubectl fails with a reason instead of running unprotected.
      await k.custom.createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: ns,
        plural: SANDBOXRUN_PLURAL,
        body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'SandboxRun', metadata: { name: 'kubectl-run' }, spec: { language: 'python', code: 'print(1)' } },
      });
      let status: { phase?: string; reason?: string; message?: string } = {};
      await until(
        async () => {
          const obj = (await k.custom.getNamespacedCustomObject({
            group: GROUP,
            version: VERSION,
            namespace: ns,
            plural: SANDBOXRUN_PLURAL,
            name: 'kubectl-run',
          })) as { status?: typeof status };
          status = obj.status ?? {};
          return status.phase === 'Failed';
        },
        60_000,
        'the kubectl-created run to fail',
      );
      expect(status.reason).toBe('SandboxNotEnforced');
      expect(status.message).toMatch(/network/);

      // So does a session created with kubectl: no pod is started for it.
      await k.custom.createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: ns,
        plural: SANDBOXSESSION_PLURAL,
        body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'SandboxSession', metadata: { name: 'kubectl-session' }, spec: { language: 'python' } },
      });
      await until(
        async () => {
          const obj = (await k.custom.getNamespacedCustomObject({
            group: GROUP,
            version: VERSION,
            namespace: ns,
            plural: SANDBOXSESSION_PLURAL,
            name: 'kubectl-session',
          })) as { status?: typeof status };
          status = obj.status ?? {};
          return status.phase === 'Failed';
        },
        60_000,
        'the kubectl-created session to fail',
      );
      expect(status.reason).toBe('SandboxNotEnforced');
      expect((await k.core.listNamespacedPod({ namespace: ns, labelSelector: 'codemode.dev/session' })).items).toEqual([]);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'runs code when the administrator accepted the risk, and says so',
    async () => {
      const o = await start({ CODEMODE_ACCEPT_UNENFORCED: 'network' });
      const state = o.operator.sandboxCheck?.status;
      expect(enforced(state).network, describeState(state)).toBe(false);
      expect(state?.kind === 'checked' && state.verdict).toMatchObject({ allowed: true, refused: [], accepted: ['network'] });
      expect(state?.kind === 'checked' && state.verdict.summary).toMatch(
        /^WARNING: this cluster does not enforce network isolation for sandboxes; code runs anyway because CODEMODE_ACCEPT_UNENFORCED=network/,
      );
      expect(await readyz(o)).toBe(200);
      const metrics = await metricsText(o);
      expect(metrics).toMatch(/codemode_sandbox_check_enforced\{check="network"\} 0/);
      expect(metrics).toMatch(/codemode_sandbox_check_accepted\{check="network"\} 1/);

      const mcp = await connect(o.url, 'current');
      const r = await mcp.callTool('execute_code', { code: 'print(6 * 7)' });
      await mcp.close();
      expect(r.structuredContent).toMatchObject({ phase: 'Succeeded', stdout: '42\n' });
    },
    TEST_TIMEOUT_MS,
  );
});
