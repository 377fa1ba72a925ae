// How long a sandbox pod may live, and so how long its run may stay undecided: the time its work
// was given plus a margin in which its outcome is read and recorded. Every rule that bounds a
// pod's life (activeDeadlineSeconds, a claim's deadline, when a run counts as lost) uses these, so
// they cannot drift apart. Pure.

/** What a pod is given past its work: the outcome's read and record. */
export const POD_DEADLINE_MARGIN_SECONDS = 60;

/**
 * How long a run or a session call waits for its ready pod to be reached (its kernel's stream, or
 * the runner's exec) while the API server or the kubelet cannot be reached: half the margin, so code
 * that starts this late still ends well before the pod's deadline and before the run may be judged
 * lost.
 */
export const OPEN_WAIT_MS = (POD_DEADLINE_MARGIN_SECONDS / 2) * 1000;

/** A run's pod: its start-up allowance (and any other wait before the code) plus the run's timeout. */
export function runPodSeconds(startupSeconds: number, timeoutSeconds: number): number {
  return startupSeconds + timeoutSeconds + POD_DEADLINE_MARGIN_SECONDS;
}

/** A session's pod: the session's maximum lifetime. */
export function sessionPodSeconds(lifetimeSeconds: number): number {
  return lifetimeSeconds + POD_DEADLINE_MARGIN_SECONDS;
}
