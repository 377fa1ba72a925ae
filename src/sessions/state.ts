// Where a session stands for a call, from its object alone. Pure.
import type { SandboxSession } from '../api/v1alpha1/index.js';

/** Where a session is for a call: ready, gone (lost or failed), or its pod or interpreter still starting. */
export function sessionState(s: SandboxSession): 'ready' | 'gone' | 'starting' {
  const phase = s.status?.phase;
  if (phase === 'Lost' || phase === 'Failed' || s.status?.kernelLost) return 'gone';
  return phase === 'Ready' && s.status?.podName ? 'ready' : 'starting';
}

/**
 * Until when a call waits for a session still starting: the start-up allowance it was given, and
 * for a session that installs packages before it is Ready also the packages allowance (the
 * session controller installs them once the interpreter is up).
 */
export function startingUntil(until: number, s: Pick<SandboxSession, 'spec'>, packagesTimeoutSeconds = 0): number {
  return (s.spec.packages?.length ?? 0) > 0 ? until + packagesTimeoutSeconds * 1000 : until;
}
