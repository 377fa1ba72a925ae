// One run of the sandbox self-check: start the canary (a real sandbox pod) and the echo listener
// (deliberately not a sandbox), prove the listener answers non-sandbox clients, run the check
// program in the canary through exec (on stdin, like code), evaluate its report, delete both pods.
import type { V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Config } from '../config/index.js';
import { parseQuantity } from '../config/quantity.js';
import type { SandboxShape } from '../profiles/profile.js';
import type { PodWatcher } from '../sandbox/pod-watcher.js';
import { execInPod, execRaw } from '../exec/exec.js';
import { apiErrorMessage, isNotFound, type KubeClients } from '../kube/clients.js';
import { LABEL_SELFCHECK, SANDBOX_CONTAINER, buildCanaryPod, sandboxPodOptions } from '../sandbox/pod.js';
import { echoAnswers, gatewayAnswers, retryFor } from './control.js';
import { ECHO_CONTAINER, ECHO_SELF_PROBE, buildEchoPod } from './echo-pod.js';
import { evaluateReport, type CheckResult, type Expectations } from './evaluate.js';
import { MAX_REPORT_BYTES, parseCanaryReport } from './report.js';
import { canaryTargets } from './targets.js';

/** Per network probe inside the canary; short, and all probes run in parallel. */
const PROBE_TIMEOUT_SECONDS = 1.5;
/** A canary or echo pod left behind by a crash stops by itself after this long. */
const POD_DEADLINE_SECONDS = 300;
const CONTROL_WINDOW_MS = 8_000;
/** Check pods older than this belong to no running check (a check takes seconds): delete them. */
const STALE_AFTER_MS = 2 * POD_DEADLINE_SECONDS * 1000;

/** Check pods a crashed process left behind; younger ones may be another replica's check. */
export function stalePods(pods: readonly V1Pod[], now: Date, maxAgeMs = STALE_AFTER_MS): string[] {
  return pods
    .filter((p) => {
      const created = p.metadata?.creationTimestamp;
      return created !== undefined && now.getTime() - new Date(created).getTime() > maxAgeMs;
    })
    .map((p) => p.metadata?.name ?? '')
    .filter((n) => n !== '');
}

export type CanaryConfig = Pick<
  Config,
  | 'namespace'
  | 'imagePullPolicy'
  | 'cpuRequest'
  | 'memoryRequest'
  | 'ephemeralStorageLimit'
  | 'tmpSizeLimit'
  | 'podStartupTimeoutSeconds'
  | 'maxProcesses'
  | 'bindAddress'
  | 'port'
>;

export interface CanaryRunDeps {
  clients: KubeClients;
  pods: PodWatcher;
  /** The deny-all NetworkPolicy must exist before any sandbox pod, the canary included. */
  policies: { ensure(namespace: string): Promise<void> };
  config: CanaryConfig;
  /**
   * What a sandbox of the default profile looks like (read per check): the canary is one, so it
   * runs where sandboxes run (a profile's node selector and tolerations) with their limits.
   */
  sandbox: () => SandboxShape;
  /** runtime/selfcheck/canary.py; undefined when runtime/ was not found. */
  program: string | undefined;
  /** Where the operator runs and which addresses it has (the gateway target). */
  place: { inCluster: boolean; apiServerUrl: string | undefined; ownAddresses: readonly string[] };
  log: Logger;
}

export type CanaryRunResult = { ok: true; results: CheckResult[] } | { ok: false; problem: string };

/** Pure: the canary (a sandbox of `shape`) and the echo listener, both on the sandboxes' nodes. */
export function checkPods(c: CanaryConfig, shape: SandboxShape): { canary: V1Pod; echo: V1Pod } {
  const image = shape.images.python;
  const { nodeSelector, tolerations } = shape;
  return {
    canary: buildCanaryPod(c.namespace, sandboxPodOptions({ ...c, ...shape }, { image, activeDeadlineSeconds: POD_DEADLINE_SECONDS })),
    echo: buildEchoPod(c.namespace, {
      image,
      imagePullPolicy: c.imagePullPolicy,
      activeDeadlineSeconds: POD_DEADLINE_SECONDS,
      ...(nodeSelector && { nodeSelector }),
      ...(tolerations && { tolerations }),
    }),
  };
}

async function createPod(d: CanaryRunDeps, body: V1Pod): Promise<string> {
  const created = await d.clients.core.createNamespacedPod({ namespace: d.config.namespace, body });
  return created.metadata?.name ?? '';
}

async function waitReady(d: CanaryRunDeps, name: string, what: string): Promise<V1Pod> {
  const state = await d.pods.waitReady(d.config.namespace, name, d.config.podStartupTimeoutSeconds * 1000);
  if (state.kind !== 'ready') throw new Error(`the ${what} pod did not start (${state.message})`);
  const pod = d.pods.get(d.config.namespace, name);
  if (!pod) throw new Error(`the ${what} pod disappeared`);
  return pod;
}

/** A non-sandbox client must exchange data with the echo listener; says which one did. */
async function echoControl(d: CanaryRunDeps, echoPod: string, ip: string): Promise<Expectations['control']> {
  if (await retryFor(() => echoAnswers(ip, 1500), CONTROL_WINDOW_MS)) return { reached: true, via: 'the operator' };
  // The operator may run outside the cluster, where pod IPs are not routed: ask the listener's
  // own pod, which at least proves the listener answers on its pod IP.
  const r = await execRaw(d.clients.exec, d.config.namespace, echoPod, ECHO_CONTAINER, ['python3', '-c', ECHO_SELF_PROBE, ip], undefined, 256, 15_000);
  const ok = r.stdout.toString('utf8').trim() === 'ok';
  return ok ? { reached: true, via: 'a client in its own pod (the operator cannot reach pod IPs)' } : { reached: false, via: 'nobody' };
}

async function runProgram(d: CanaryRunDeps, canary: string, program: string, targets: unknown): Promise<string> {
  const args = JSON.stringify({ timeout: PROBE_TIMEOUT_SECONDS, max_processes: d.config.maxProcesses, targets });
  const r = await execInPod(d.clients.exec, {
    namespace: d.config.namespace,
    pod: canary,
    container: SANDBOX_CONTAINER,
    command: ['python3', '-', args],
    stdin: Buffer.from(program, 'utf8'),
    capChars: MAX_REPORT_BYTES,
    watchdogMs: 60_000,
  });
  // stderr is the pod's output: never logged or quoted, only the exit status is.
  if (r.exitCode !== 0) throw new Error(`the check program did not finish (${r.error ?? `exit code ${String(r.exitCode)}`})`);
  if (r.stdout.truncated) throw new Error(`the report is larger than ${MAX_REPORT_BYTES} characters`);
  return r.stdout.text;
}

async function deletePod(d: CanaryRunDeps, name: string): Promise<void> {
  if (name === '') return;
  try {
    await d.clients.core.deleteNamespacedPod({ namespace: d.config.namespace, name, gracePeriodSeconds: 0 });
  } catch (err) {
    if (!isNotFound(err)) d.log.warn({ pod: name, err: apiErrorMessage(err) }, 'Failed to delete a sandbox check pod; its deadline stops it');
  }
}

async function sweepStale(d: CanaryRunDeps): Promise<void> {
  try {
    const list = await d.clients.core.listNamespacedPod({ namespace: d.config.namespace, labelSelector: LABEL_SELFCHECK });
    await Promise.all(stalePods(list.items, new Date()).map((name) => deletePod(d, name)));
  } catch (err) {
    d.log.warn({ err: apiErrorMessage(err) }, 'Failed to list old sandbox check pods');
  }
}

export async function runCanary(d: CanaryRunDeps): Promise<CanaryRunResult> {
  if (d.program === undefined) return { ok: false, problem: 'runtime/selfcheck/canary.py was not found next to the code' };
  const c = d.config;
  const shape = d.sandbox();
  const pods = checkPods(c, shape);
  await sweepStale(d);
  let canary = '';
  let echo = '';
  try {
    await d.policies.ensure(c.namespace);
    const created = await Promise.allSettled([createPod(d, pods.canary), createPod(d, pods.echo)]);
    // Remember whichever was created, so `finally` deletes it even when the other failed.
    [canary = '', echo = ''] = created.map((r) => (r.status === 'fulfilled' ? r.value : ''));
    for (const r of created) if (r.status === 'rejected') throw new Error(`could not create a check pod: ${apiErrorMessage(r.reason)}`, { cause: r.reason });
    const [, echoPod] = await Promise.all([waitReady(d, canary, 'canary'), waitReady(d, echo, 'echo')]);
    const echoIp = echoPod.status?.podIP;
    if (!echoIp) throw new Error('the echo pod has no IP');
    const { targets, gatewaySkipped } = canaryTargets({ ...d.place, bindAddress: c.bindAddress, port: c.port, echoIp });
    const gatewayHosts = targets.filter((t) => t.name === 'gateway');
    const [control, gatewayAnswered] = await Promise.all([
      echoControl(d, echo, echoIp),
      gatewayHosts.length === 0
        ? Promise.resolve(undefined)
        : retryFor(async () => (await Promise.all(gatewayHosts.map((t) => gatewayAnswers(t.host, t.port, 1500)))).every(Boolean), CONTROL_WINDOW_MS),
    ]);
    const parsed = parseCanaryReport(await runProgram(d, canary, d.program, targets));
    if (!parsed.ok) return { ok: false, problem: parsed.problem };
    const expectations: Expectations = {
      maxProcesses: c.maxProcesses,
      memoryLimitBytes: parseQuantity(shape.defaultMemory),
      control,
      ...(gatewaySkipped !== undefined && { gatewaySkipped }),
      ...(gatewayAnswered !== undefined && { gatewayAnswered }),
    };
    return { ok: true, results: evaluateReport(parsed.report, expectations) };
  } catch (err) {
    return { ok: false, problem: apiErrorMessage(err) };
  } finally {
    await Promise.all([deletePod(d, canary), deletePod(d, echo)]);
  }
}
