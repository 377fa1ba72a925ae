// A SandboxRun applied together with a SandboxSession that installs packages waits for the install,
// not only for the start-up allowance (sessions/service.ts startingUntil, and the run's budget in
// run-decision.ts lostAfterMs): the session becomes Ready only once its packages are in, which
// takes longer than a pod start. Before, such a run failed SessionNotReady once the start-up
// allowance was over. The allowance here is 3 s and the session's pod comes from the warm pool, so
// the session is up at once while the install (a fetcher pod, PyPI, the copy into the session)
// outlasts it; the test checks that it did, or it would prove nothing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  API_VERSION,
  GROUP,
  SANDBOXRUN_KIND,
  SANDBOXRUN_PLURAL,
  SANDBOXSESSION_KIND,
  SANDBOXSESSION_PLURAL,
  VERSION,
  isTerminalPhase,
  type SandboxRun,
  type SandboxSession,
} from '../../src/api/v1alpha1/index.js';
import { createNamespace, deleteNamespace, readyPoolPods, testKube, until } from './helpers/kube.js';
import { startOperator, type RunningOperator } from './helpers/operator.js';

const STARTUP_SECONDS = 3;

const k = testKube();
let ns = '';
let op: RunningOperator;
const api = { group: GROUP, version: VERSION };

beforeAll(async () => {
  ns = await createNamespace(k, 'sess-pkg-start');
  op = await startOperator(ns, { CODEMODE_POD_STARTUP_TIMEOUT_SECONDS: String(STARTUP_SECONDS), CODEMODE_WARM_POOL_SIZE: '1' });
  // The session's pod is claimed from the pool: wait until there is one ready.
  await until(async () => (await readyPoolPods(k, ns)).length > 0, 120_000, 'a ready warm pool pod');
}, 300_000);
afterAll(async () => {
  await op?.stop();
  await deleteNamespace(k, ns);
});

async function session(name: string): Promise<SandboxSession> {
  return (await k.custom.getNamespacedCustomObject({ ...api, namespace: ns, plural: SANDBOXSESSION_PLURAL, name })) as SandboxSession;
}

describe('a SandboxRun in a session that installs packages', () => {
  it('waits past the start-up allowance for the install, then runs once with the package importable', async () => {
    await k.custom.createNamespacedCustomObject({
      ...api,
      namespace: ns,
      plural: SANDBOXSESSION_PLURAL,
      body: { apiVersion: API_VERSION, kind: SANDBOXSESSION_KIND, metadata: { name: 'with-pkg' }, spec: { language: 'python', packages: ['tabulate==0.9.0'] } },
    });
    const body = {
      apiVersion: API_VERSION,
      kind: SANDBOXRUN_KIND,
      metadata: { name: 'uses-pkg' },
      spec: {
        session: 'with-pkg',
        language: 'python',
        code: 'import tabulate\nruns = globals().get("runs", 0) + 1\nprint(tabulate.__version__, runs)',
        timeoutSeconds: 30,
      },
    };
    const run = (await k.custom.createNamespacedCustomObject({ ...api, namespace: ns, plural: SANDBOXRUN_PLURAL, body })) as SandboxRun;

    // Past the run's start-up allowance the session is still installing: the run must still wait.
    // The allowance ends where the operator puts it, at the run's creationTimestamp (whole seconds,
    // so at most 3 s after the create) plus STARTUP_SECONDS; looked at just after. A fixed 4 s
    // after the create left no margin on a fast machine (the install took 4.0–4.6 s there).
    const allowanceEnds = Date.parse(run.metadata.creationTimestamp ?? new Date().toISOString()) + STARTUP_SECONDS * 1000;
    await new Promise((r) => setTimeout(r, Math.max(0, allowanceEnds + 250 - Date.now())));
    const midway = await session('with-pkg');
    expect(midway.status?.phase, 'the install finished within the start-up allowance, so this test proved nothing').not.toBe('Ready');
    const runMidway = (await k.custom.getNamespacedCustomObject({ ...api, namespace: ns, plural: SANDBOXRUN_PLURAL, name: 'uses-pkg' })) as SandboxRun;
    expect(isTerminalPhase(runMidway.status?.phase), JSON.stringify(runMidway.status)).toBe(false);

    let status: SandboxRun['status'];
    await until(
      async () => {
        status = ((await k.custom.getNamespacedCustomObject({ ...api, namespace: ns, plural: SANDBOXRUN_PLURAL, name: 'uses-pkg' })) as SandboxRun).status;
        return isTerminalPhase(status?.phase);
      },
      180_000,
      'the SandboxRun to finish',
    );
    expect(status, JSON.stringify(status)).toMatchObject({ phase: 'Succeeded', stdout: '0.9.0 1\n' });
    expect((await session('with-pkg')).status?.phase).toBe('Ready');
  }, 300_000);
});
