// The authenticated caller of a tool call, as the owner its runs and sessions record.
import type { ServerContext } from '@modelcontextprotocol/server';
import type { Owner } from '../api/v1alpha1/index.js';
import { identityOf } from '../auth/middleware.js';

/** undefined when the gateway runs without authentication wiring (tool tests). */
export function callerOf(ctx: ServerContext): Owner | undefined {
  const id = identityOf(ctx.http?.req);
  return id && { user: id.user, ...(id.groups.length > 0 && { groups: [...id.groups] }) };
}
