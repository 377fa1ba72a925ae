// Fault (c): sandbox pods deleted mid-run — the pod of a transient run while its code runs, and
// the pod of a session while a call is in it. The run ends Failed with a reason and is not started
// again; the session says it is lost; everything else keeps its invariants (helpers/verdict.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GROUP, SANDBOXSESSION_PLURAL, VERSION, type SandboxSession } from '../../../src/api/v1alpha1/index.js';
import { createNamespace, deleteNamespace, testKube, until } from '../helpers/kube.js';
import { connect } from '../helpers/operator.js';
import { freePort, gatewayEnv, startGateway, stopGateway, type GatewayProcess } from './helpers/gateway-process.js';
import { Mix, transientCode } from './helpers/mix.js';
import { listRuns, PodLedger, verdict } from './helpers/verdict.js';
import { tearDown } from './helpers/teardown.js';

const k = testKube();
const STARTUP_SECONDS = 20;
let ns = '';
let ledger: PodLedger;
let gw: GatewayProcess | undefined;
let mix: Mix | undefined;

beforeAll(async () => {
  ns = await createNamespace(k, 'fault-pod');
  ledger = new PodLedger(k, ns);
  await ledger.start();
});
afterAll(async () => {
  await tearDown([() => mix?.close(), () => stopGateway(gw), () => ledger?.stop(), () => deleteNamespace(k, ns)]);
});

const podOfRun = async (uid: string): Promise<string | undefined> =>
  (await k.core.listNamespacedPod({ namespace: ns })).items.find(
    (p) => p.metadata?.ownerReferences?.some((o) => o.uid === uid) && !p.metadata.deletionTimestamp,
  )?.metadata?.name;

describe('fault: a sandbox pod deleted mid-run', () => {
  it('fails the run with a reason, never starts it again, and loses only the session whose pod went', { timeout: 420_000 }, async () => {
    gw = await startGateway(gatewayEnv(ns, { CODEMODE_POD_STARTUP_TIMEOUT_SECONDS: String(STARTUP_SECONDS) }), await freePort());
    const url = gw.url;
    mix = new Mix({ urls: () => [url], sessions: 2, kube: { k, namespace: ns } });
    await mix.start();

    const client = await connect(url, 'current');
    const victimId = `t-victim-${Date.now()}`;
    const answer = client.callTool('execute_code', { code: transientCode(victimId, 8), timeout_seconds: 10 });
    let pod: string | undefined;
    let uid = '';
    await until(
      async () => {
        const run = (await listRuns(k, ns)).find((r) => r.spec.code?.includes(victimId));
        uid = run?.metadata.uid ?? '';
        pod = run?.status?.phase === 'Running' ? await podOfRun(uid) : undefined;
        return pod !== undefined;
      },
      120_000,
      'the victim run Running in its pod',
    );
    await k.core.deleteNamespacedPod({ namespace: ns, name: pod as string, gracePeriodSeconds: 0 });
    const r = await answer;
    expect(r.isError, JSON.stringify(r.structuredContent)).toBe(true);
    expect(String(r.structuredContent?.message ?? '').length).toBeGreaterThan(20);

    // A session's pod, while its calls go on.
    const lostSession = mix.sessions[0] as string;
    const s = (await k.custom.getNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      plural: SANDBOXSESSION_PLURAL,
      namespace: ns,
      name: lostSession,
    })) as SandboxSession;
    await k.core.deleteNamespacedPod({ namespace: ns, name: s.status?.podName ?? '', gracePeriodSeconds: 0 });
    await mix.waitFor((c) => c.session === lostSession && c.outcome === 'error', 'the lost session saying so');
    await mix.waitFor((c) => c.kind === 'transient' && c.outcome === 'ok', 'a transient run after the deletions');
    await mix.waitFor((c) => c.session === mix?.sessions[1] && c.outcome === 'ok', 'a call in the other session');
    await mix.stop();
    await client.close();

    const { problems, summary } = await verdict(k, ns, mix, ledger, STARTUP_SECONDS);
    console.log(`pod-delete: ${JSON.stringify(summary)}`);
    expect(problems).toEqual([]);
    const v = (await listRuns(k, ns)).find((x) => x.metadata.uid === uid);
    expect(v?.status?.phase, JSON.stringify(v?.status)).toBe('Failed');
    expect(v?.status?.reason).toMatch(/^(PodDeleted|ExecFailed)$/);
    expect(ledger.count(uid)).toBe(1);
    // Every later call in the lost session says it is lost; the other session kept its state.
    const lostCalls = mix.records.filter((c) => c.session === lostSession && c.outcome === 'error');
    expect(lostCalls.at(-1)?.detail).toMatch(/lost/);
    expect(summary.sessionsSurviving).toBe(mix.sessions.length - 1);
  });
});
