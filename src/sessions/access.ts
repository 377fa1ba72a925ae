// Who may see and use a session: its owner, and members of the administrator's groups. Everyone
// else gets "not found", exactly as for a name that does not exist, so names cannot be probed.
import type { Owner, SandboxSession } from '../api/v1alpha1/index.js';

/** A session created without an owner (before authentication, or with mode none) is anonymous's. */
export const UNOWNED_USER = 'anonymous';

/**
 * Pure: may `caller` see `session`? `caller` undefined means an internal caller (the controller, a
 * kubectl SandboxRun without an owner, tool tests without authentication): it sees everything.
 */
export function canSee(session: Pick<SandboxSession, 'spec'>, caller: Owner | undefined, adminGroups: readonly string[]): boolean {
  if (caller === undefined) return true;
  if ((caller.groups ?? []).some((g) => adminGroups.includes(g))) return true;
  return (session.spec.owner?.user ?? UNOWNED_USER) === caller.user;
}
