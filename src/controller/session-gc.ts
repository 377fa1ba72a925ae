// Idle garbage collection of sessions as pure time math: when does a session expire, and why.
// Last activity lives in the session's status (written through the API), so a gateway restart
// loses nothing; the controller only needs requeueAfter(remaining), never a loop over all pods.
import type { SandboxSession } from '../api/v1alpha1/index.js';

export interface SessionExpiry {
  /** When the session is deleted if nothing happens before. */
  expiresAt: Date;
  /** Why it expires at expiresAt. */
  cause: 'idle' | 'lifetime';
  /** Milliseconds left (≤ 0: collect now). */
  remainingMs: number;
}

export function sessionExpiry(session: SandboxSession, defaultMaxLifetimeSeconds: number, now: Date): SessionExpiry {
  const created = Date.parse(session.metadata.creationTimestamp ?? now.toISOString());
  const lastActivity = session.status?.lastActivityTime ? Date.parse(session.status.lastActivityTime) : created;
  const idleAt = Math.max(lastActivity, created) + session.spec.idleTimeoutSeconds * 1000;
  const lifetimeAt = created + (session.spec.maxLifetimeSeconds ?? defaultMaxLifetimeSeconds) * 1000;
  const cause = lifetimeAt <= idleAt ? 'lifetime' : 'idle';
  const at = Math.min(idleAt, lifetimeAt);
  return { expiresAt: new Date(at), cause, remainingMs: at - now.getTime() };
}
