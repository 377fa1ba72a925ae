// The outcome of a run whose executor is gone (another replica found stopped, or an outcome never
// recorded), read back and recorded by the replica that claimed it: from the kernel of the pod that
// carries it, or, for a run in a session, from the session's kernel. Never starts the code; when
// nothing can tell, the run ends Failed with the reason given.
import type { Logger } from 'pino';
import { Reasons, type SandboxRun } from '../api/v1alpha1/index.js';
import type { EventRecorder } from '../kube/events.js';
import type { ColdPods } from './cold-pods.js';
import type { Executed, InPodExecution } from './in-pod.js';
import type { RunRecorder } from './record.js';
import type { SessionRuns } from './session-run.js';
import { classifyExecution, completedStatus, failedStatus, type Classification, type Limits } from './status.js';

/**
 * The least time a recovery waits for a kernel's answer: a run past its budget has long ended in
 * its kernel, which then answers at once; this only covers opening the stream.
 */
const RECALL_MIN_WAIT_MS = 20_000;

export interface RecoveryDeps {
  record: RunRecorder;
  inPod: Pick<InPodExecution, 'recall'>;
  inSession: Pick<SessionRuns, 'recover'>;
  cold: Pick<ColdPods, 'delete'>;
  events: EventRecorder;
  /** The administrator's limits the run is judged by. */
  limits(run: SandboxRun): Limits;
}

/**
 * The kernel of the pod that carries the run (`pods`: its cold pod or claimed pool pod, asked in
 * turn; a kernel that never got the run says so at once) keeps the result of the run it executed
 * and, while the code still runs, answers once it ends (within `budgetMs`): that outcome is
 * recorded as its executor would have, then the pod goes. When nothing can tell (no pod, a kernel
 * gone or one that never got the run), the run ends Failed with `message`. Resolves to how the run
 * ended; rejects only when the outcome could not be recorded.
 */
export async function recoverOutcome(
  d: RecoveryDeps,
  run: SandboxRun,
  pods: readonly string[],
  message: string,
  budgetMs: number,
  log: Logger,
): Promise<Classification> {
  const ns = d.record.namespaceOf(run);
  const waitMs = Math.max(budgetMs, RECALL_MIN_WAIT_MS);
  const inSession = run.spec.session !== undefined && (await d.inSession.recover(run, run.spec.session, waitMs, log));
  if (inSession) return inSession;
  let executed: Executed | undefined;
  let podName: string | undefined;
  for (const name of run.spec.session === undefined ? pods : []) {
    executed = await d.inPod.recall(run, ns, name, waitMs);
    if (executed) {
      podName = name;
      break;
    }
  }
  if (!executed || podName === undefined) {
    // How long the code ran is unknown: no durationMs, rather than the time until now.
    const { durationMs: _unknown, ...status } = failedStatus(run, Reasons.ExecFailed, message, new Date());
    await d.record.patchStatus(run, status, log);
    const failed: Classification = { phase: 'Failed', reason: Reasons.ExecFailed, message };
    d.record.recordOutcome(run, failed);
    return failed;
  }
  const c = classifyExecution(executed.facts, run.spec.timeoutSeconds, d.limits(run));
  const { durationMs: _sinceStart, ...completed } = completedStatus(run, c, executed.captured, { end: new Date() });
  const status = d.record.fit(run, {
    ...completed,
    // The kernel timed the code; the time since the run's start would count the recovery too.
    ...(executed.durationMs !== undefined && { durationMs: executed.durationMs }),
    podName,
  });
  await d.record.patchStatus(run, status, log);
  d.events.record(
    { name: run.metadata.name, namespace: ns, uid: run.metadata.uid },
    'Normal',
    'Recovered',
    'Recover',
    `The gateway replica executing this run stopped before it recorded the outcome; the outcome was read back from pod ${podName}.`,
  );
  // The pod is the marker that the code started: it goes only now that the outcome is stored.
  d.cold.delete(ns, podName, log);
  d.record.recordOutcome(run, c);
  log.info({ phase: c.phase, reason: c.reason }, 'Recovered the outcome of a SandboxRun whose executor stopped');
  return c;
}
