// Who may use an upstream and which of its tools: pure functions of the UpstreamServer spec, used
// both when the catalog is cached and again on every call (the catalog can be stale).
import type { UpstreamServerSpec } from '../api/v1alpha1/index.js';
import type { Caller } from './types.js';

/** A glob as a RegExp: `*` any run of characters, `?` one; everything else literal. */
export function globToRegExp(glob: string): RegExp {
  let out = '';
  for (const ch of glob) {
    if (ch === '*') out += '.*';
    else if (ch === '?') out += '.';
    else out += ch.replace(/[\\^$.|+()[\]{}]/g, '\\$&');
  }
  return new RegExp(`^${out}$`, 's');
}

/** Matches tool names against allow and deny globs (compiled once per spec). */
export class ToolFilter {
  private readonly allow: RegExp[];
  private readonly deny: RegExp[];

  constructor(tools: UpstreamServerSpec['tools']) {
    this.allow = (tools?.allow ?? []).map(globToRegExp);
    this.deny = (tools?.deny ?? []).map(globToRegExp);
  }

  /** Deny wins; an empty allow list allows everything. */
  allows(tool: string): boolean {
    if (this.deny.some((r) => r.test(tool))) return false;
    return this.allow.length === 0 || this.allow.some((r) => r.test(tool));
  }
}

/**
 * May `caller` use an upstream with this access list? No list (or two empty ones): every caller
 * the gateway authenticated. A caller the gateway could not name (tools wired without
 * authentication) only reaches unrestricted upstreams.
 */
export function mayUse(access: UpstreamServerSpec['access'], caller: Caller | undefined): boolean {
  const users = access?.users ?? [];
  const groups = access?.groups ?? [];
  if (users.length === 0 && groups.length === 0) return true;
  if (!caller) return false;
  return users.includes(caller.user) || (caller.groups ?? []).some((g) => groups.includes(g));
}
