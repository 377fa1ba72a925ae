// Idle garbage collection of sessions as pure time math: when does a session expire, and why.
// Last activity lives in the session's object (written through the API), so a gateway restart
// loses nothing; the controller only needs requeueAfter(remaining), never a loop over all pods.
import type { KubernetesObject } from '@kubernetes/client-node';
import { GATEWAY_FIELD_MANAGER, type SandboxSession } from '../api/v1alpha1/index.js';

export interface SessionExpiry {
  /** When the session is deleted if nothing happens before. */
  expiresAt: Date;
  /** Why it expires at expiresAt. */
  cause: 'idle' | 'lifetime';
  /** Milliseconds left (≤ 0: collect now). */
  remainingMs: number;
}

/**
 * Pure: when the API server stored the gateway's last activity write (the time of the gateway's
 * managedFields entry, in whole seconds), or undefined. Unlike status.lastActivityTime this is
 * not the writing replica's clock, which may be behind the controller's.
 */
export function activityStoredAt(session: { metadata?: Record<string, unknown> }): number | undefined {
  const entries = session.metadata?.['managedFields'];
  if (!Array.isArray(entries)) return undefined;
  let at: number | undefined;
  for (const e of entries as Array<{ manager?: unknown; subresource?: unknown; time?: unknown }>) {
    if (e?.manager !== GATEWAY_FIELD_MANAGER || e.subresource !== 'status') continue;
    const t = e.time instanceof Date ? e.time.getTime() : Date.parse(String(e.time ?? ''));
    if (Number.isFinite(t)) at = Math.max(at ?? t, t);
  }
  return at;
}

/**
 * The session's managedFields cut to what activityStoredAt reads (the gateway's entry, without
 * its field set), for the session informer's cache: the rest is large and read by nothing.
 */
export function keepActivityStamp<T extends KubernetesObject>(obj: T): T {
  if (!obj.metadata || !('managedFields' in obj.metadata)) return obj;
  const { managedFields, ...metadata } = obj.metadata;
  const kept = (managedFields ?? [])
    .filter((e) => e.manager === GATEWAY_FIELD_MANAGER && e.subresource === 'status')
    .map(({ manager, operation, subresource, time }) => ({ manager, operation, subresource, time }));
  return { ...obj, metadata: { ...metadata, ...(kept.length > 0 && { managedFields: kept }) } };
}

export function sessionExpiry(session: SandboxSession, defaultMaxLifetimeSeconds: number, now: Date): SessionExpiry {
  const created = Date.parse(session.metadata.creationTimestamp ?? now.toISOString());
  let lastActivity = session.status?.lastActivityTime ? Date.parse(session.status.lastActivityTime) : created;
  // Clock skew: lastActivityTime is the gateway replica's clock. One behind the controller's
  // would have sessions collected early (right after a call, with a short idle timeout), so the
  // API server's record of the write counts too: less a second for its whole seconds (with
  // agreeing clocks lastActivityTime stays the one that counts), and never in the future (the
  // record can be written by whoever may update the object: it can only make the session as
  // busy as a call made now, which its owner could make).
  const stored = activityStoredAt(session);
  if (stored !== undefined) lastActivity = Math.max(lastActivity, Math.min(stored - 1000, now.getTime()));
  const lifetimeAt = created + (session.spec.maxLifetimeSeconds ?? defaultMaxLifetimeSeconds) * 1000;
  // A session still starting (its pod, then its packages: minutes, bounded by the startup and
  // install timeouts) is not idle: no call can reach it yet, so nothing could have kept it. Its
  // idle time counts from when it became Ready (or ended Lost or Failed: the Ready condition's last
  // change), so a short idle timeout does not delete a session during a long install.
  const phase = session.status?.phase;
  if (phase === undefined || phase === 'Pending') return { expiresAt: new Date(lifetimeAt), cause: 'lifetime', remainingMs: lifetimeAt - now.getTime() };
  const changedAt = Date.parse(session.status?.conditions?.find((c) => c.type === 'Ready')?.lastTransitionTime ?? '');
  const idleFrom = Math.max(lastActivity, created, Number.isFinite(changedAt) ? Math.min(changedAt, now.getTime()) : created);
  const idleAt = idleFrom + session.spec.idleTimeoutSeconds * 1000;
  const cause = lifetimeAt <= idleAt ? 'lifetime' : 'idle';
  const at = Math.min(idleAt, lifetimeAt);
  return { expiresAt: new Date(at), cause, remainingMs: at - now.getTime() };
}
