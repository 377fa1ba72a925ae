// Faults that disrupt the whole shared cluster: a restart of kube-apiserver or of the kubelet,
// injected during the fault mix (test/e2e/faults/helpers). The component is stopped as
// test/cluster/lib.sh stop_daemon does (TERM, KILL after 10 s, by its PID file) and started again
// by test/cluster/up.sh, which starts exactly what is not running. Runs in its own vitest project
// after the e2e phase, serially: other suites would see the outage.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { ANNOTATION_EXECUTOR } from '../../src/api/v1alpha1/index.js';
import { CLUSTER_DIR } from '../../scripts/cluster-paths.js';
import { createNamespace, deleteNamespace, testKube, until } from '../e2e/helpers/kube.js';
import { freePort, gatewayEnv, startGateway, stopGateway, type GatewayProcess } from '../e2e/faults/helpers/gateway-process.js';
import { Mix } from '../e2e/faults/helpers/mix.js';
import { listRuns, PodLedger, verdict } from '../e2e/faults/helpers/verdict.js';

const STARTUP_SECONDS = 20;

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** Stops the component by its PID file and starts it again with up.sh; returns both PIDs. */
export async function restartComponent(name: 'kube-apiserver' | 'kubelet'): Promise<{ before: number; after: number }> {
  const pidFile = join(CLUSTER_DIR, 'pids', `${name}.pid`);
  const before = Number(readFileSync(pidFile, 'utf8'));
  process.kill(before, 'SIGTERM');
  await until(() => !alive(before), 10_000, `${name} stopped`).catch(() => process.kill(before, 'SIGKILL'));
  await until(() => !alive(before), 10_000, `${name} killed`);
  // Asynchronously: the mix in this process keeps calling meanwhile.
  const out = await new Promise<{ code: number | null; text: string }>((resolve) => {
    const child = spawn('bash', [join('test/cluster', 'up.sh')], { stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    child.stdout.on('data', (d: Buffer) => (text += d.toString('utf8')));
    child.stderr.on('data', (d: Buffer) => (text += d.toString('utf8')));
    child.on('exit', (code) => resolve({ code, text }));
  });
  expect(out.code, out.text.slice(-2000)).toBe(0);
  const after = Number(readFileSync(pidFile, 'utf8'));
  expect(after).not.toBe(before);
  return { before, after };
}

/**
 * One scenario: a replica (child process) serves the mix; once it executes a run, `component`
 * restarts; the mix must recover, and the verdict's invariants hold.
 */
export async function clusterFaultScenario(component: 'kube-apiserver' | 'kubelet'): Promise<void> {
  const k = testKube();
  const ns = await createNamespace(k, `fault-${component === 'kubelet' ? 'kubelet' : 'apiserver'}`);
  const ledger = new PodLedger(k, ns);
  let gw: GatewayProcess | undefined;
  let mix: Mix | undefined;
  try {
    await ledger.start();
    gw = await startGateway(gatewayEnv(ns, { CODEMODE_POD_STARTUP_TIMEOUT_SECONDS: String(STARTUP_SECONDS) }), await freePort());
    const url = gw.url;
    const identity = gw.identity;
    mix = new Mix({ urls: () => [url], runSleepSeconds: 2, kube: { k, namespace: ns } });
    await mix.start();
    await until(
      async () => (await listRuns(k, ns)).some((r) => r.metadata.annotations?.[ANNOTATION_EXECUTOR] === identity && r.status?.phase === 'Running'),
      120_000,
      'a run in flight',
    );
    await restartComponent(component);
    await mix.waitFor((c) => c.kind === 'transient' && c.outcome === 'ok', `a transient run after the ${component} restart`, 240_000);
    await mix.waitFor((c) => c.kind === 'session' && c.outcome === 'ok', `a session call after the ${component} restart`, 240_000);
    await mix.stop();
    const { problems, summary } = await verdict(k, ns, mix, ledger, STARTUP_SECONDS);
    console.log(`${component} restart: ${JSON.stringify(summary)}`);
    expect(problems).toEqual([]);
    // Pods and their kernels outlive both restarts: every session keeps its state.
    expect(summary.sessionsSurviving).toBe(mix.sessions.length);
  } finally {
    await mix?.stop();
    await mix?.close();
    await stopGateway(gw);
    ledger.stop();
    await deleteNamespace(k, ns);
  }
}
