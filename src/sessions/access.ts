// Who may see and use a session: its owner, and members of the administrator's groups. Everyone
// else gets "not found", exactly as for a name that does not exist, so names cannot be probed.
import type { Owner, SandboxSession } from '../api/v1alpha1/index.js';
import { ANONYMOUS } from '../auth/identity.js';
import { failure } from '../codemode/frames.js';
import type { CallHandler } from '../exec/kernel-stream.js';

/** A session created without an owner (before authentication, or made with kubectl) is anonymous's. */
export const UNOWNED_USER = ANONYMOUS.user;

/**
 * The caller of a gateway without authentication (CODEMODE_AUTH_MODE=none): `anonymous` in the
 * group Kubernetes gives unauthenticated requests. Matched on both, so that an authenticated user
 * who happens to be named "anonymous" (a token's user, an OIDC subject) is not taken for it.
 */
const isUnauthenticated = (caller: Owner): boolean => caller.user === UNOWNED_USER && (caller.groups ?? []).some((g) => ANONYMOUS.groups.includes(g));

/**
 * Pure: is `caller` the session's owner? An ownerless session is the unauthenticated caller's.
 * `caller` undefined is an internal caller (see canSee), which acts for the owner.
 */
export function isOwner(session: Pick<SandboxSession, 'spec'>, caller: Owner | undefined): boolean {
  if (caller === undefined) return true;
  const owner = session.spec.owner?.user;
  return owner === undefined ? isUnauthenticated(caller) : owner === caller.user;
}

/**
 * Pure: may `caller` see `session`? `caller` undefined means an internal caller (the controller, a
 * kubectl SandboxRun without an owner, tool tests without authentication): it sees everything.
 */
export function canSee(session: Pick<SandboxSession, 'spec'>, caller: Owner | undefined, adminGroups: readonly string[]): boolean {
  if (caller === undefined) return true;
  if ((caller.groups ?? []).some((g) => adminGroups.includes(g))) return true;
  return isOwner(session, caller);
}

/** What sandbox code's tool calls get during a call in a session its caller does not own. */
export const LENT_TOOLS_REFUSED =
  "tool calls are not made from another user's session: code its owner left running there could make them with your access. Run the code outside the session, or in a session of your own.";

/**
 * Pure: who answers the tool calls made during `caller`'s call in `session`. Any process in the
 * sandbox can send them while a call runs (runtime/PROTOCOL.md, "Tool calls"), so in another
 * user's session (an administrator's call there) code its owner left running — a thread, a
 * background process — would have them made with the caller's access to upstreams: refused.
 */
export function toolCallsFor(session: Pick<SandboxSession, 'spec'>, caller: Owner | undefined, onCall: CallHandler): CallHandler {
  return isOwner(session, caller) ? onCall : async () => failure('denied', LENT_TOOLS_REFUSED);
}
