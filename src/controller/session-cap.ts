// The per-user session limit (CODEMODE_USER_MAX_SESSIONS) as the controller holds it, for every
// session whatever created it. The gateway refuses create_session beyond the limit, but a
// SandboxSession applied with kubectl never passes through it: without this, a user could start
// any number of session pods. Decided once, before the session's pod exists, and pure.
import type { KubernetesObject } from '@kubernetes/client-node';
import type { SandboxSession } from '../api/v1alpha1/index.js';
import { SessionReasons } from '../api/v1alpha1/index.js';

type Obj = KubernetesObject & { spec?: { owner?: { user?: unknown } }; status?: { phase?: unknown; reason?: unknown } };

/** The order sessions are admitted in: creation (whole seconds), then name. */
function before(a: KubernetesObject, b: KubernetesObject): boolean {
  const ta = Date.parse(String(a.metadata?.creationTimestamp ?? ''));
  const tb = Date.parse(String(b.metadata?.creationTimestamp ?? ''));
  if (ta !== tb) return ta < tb;
  return (a.metadata?.name ?? '') < (b.metadata?.name ?? '');
}

/**
 * Pure: the message that refuses `session` for its owner's session limit `cap`, or undefined when
 * it may start. Counted among `all` (the namespace's sessions): the owner's other sessions not
 * being deleted and not refused for this limit themselves, that either started (the controller
 * gave them a phase) or come before this one in creation order — so that of sessions applied
 * together, the same ones start whichever is reconciled first. Sessions without an owner, and a
 * cap of 0, are not limited (as in the gateway).
 */
export function userSessionCapRefusal(session: SandboxSession, all: readonly KubernetesObject[], cap: number): string | undefined {
  const user = session.spec.owner?.user;
  if (cap <= 0 || user === undefined) return undefined;
  let count = 0;
  for (const o of all as readonly Obj[]) {
    if (o.metadata?.uid === session.metadata.uid || o.spec?.owner?.user !== user || o.metadata?.deletionTimestamp) continue;
    if (o.status?.phase === 'Failed' && o.status.reason === SessionReasons.UserSessionLimit) continue;
    if (o.status?.phase !== undefined || before(o, session as KubernetesObject)) count++;
  }
  if (count < cap) return undefined;
  return (
    `User ${user} already has ${count} live session${count === 1 ? '' : 's'}; the limit is ${cap} per user (CODEMODE_USER_MAX_SESSIONS), whether a session is made ` +
    'with create_session or kubectl. Delete a session you no longer need, then create this one again.'
  );
}
