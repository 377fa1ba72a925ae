// The bounded queue of session calls waiting for their audit records (src/audit/writer.ts writes
// them): bookkeeping only — no I/O, no timers, no logger; time comes in as `now`. Calls of the same
// session and owner share records, so calls are held by session, in the order each session's oldest
// call was queued, and counted by user, because the queue (`capacity` calls) is shared fairly by user:
// - Once it is full, a call of a user holding fewer queued calls than the largest holder takes the
//   place of that holder's newest call (evicted); a call of the largest holder (or of one tied with
//   it) is refused: add() returns false and the caller drops it.
// - A failed write's calls go back first in their session's line, due at once; over the bound then,
//   shed() drops the largest holders' newest calls.
// Each call the queue drops itself is reported through `onDrop` as it goes (the queue's length
// already without it), so the writer counts and logs drops exactly where they happen.
import type { Owner } from '../api/v1alpha1/index.js';
import type { AuditEntry } from './record.js';

/** A call waiting to be written. */
export interface Queued {
  entry: AuditEntry;
  /** Queue order over all sessions: the newest call has the highest. */
  seq: number;
  /** When a write of it first failed with an error worth retrying (the writer's note; `now`'s clock). */
  failingSince?: number;
}

/** The calls of one session waiting for their record, oldest first; never empty. */
export interface Pending {
  user: string;
  entries: Queued[];
  /** When the oldest of them was queued (`now`'s clock); 0: due at once (a retry). */
  since: number;
}

/** Why the queue dropped a call: it made room for a smaller holder's, or it was over the bound after a put-back. */
export type QueueDrop = 'evicted' | 'shed';

/** Which session's record to write now, or when to look again (undefined: nothing to wait for). */
export type DueChoice = { take: string } | { wakeAt: number } | undefined;

/** How soon a due session whose user may not have another record yet (`held`) is looked at again. */
export const HELD_RECHECK_MS = 1000;

/**
 * Pure: the first session (in `pending`'s order) none of whose records is being written and whose
 * record is due — its oldest call waited `lingerMs`, it has `max` calls, or the writer is stopping
 * (`flushing`) — and whose user `held` does not hold back (at their share of live records: its
 * calls wait, gathering into one record, and are looked at again in HELD_RECHECK_MS); else when
 * the soonest of the others is due.
 */
export function chooseDue(
  pending: ReadonlyMap<string, { user?: string; entries: readonly unknown[]; since: number }>,
  writing: ReadonlySet<string>,
  now: number,
  lingerMs: number,
  max: number,
  flushing: boolean,
  held: (user: string) => boolean = () => false,
): DueChoice {
  let wakeAt = Infinity;
  for (const [key, p] of pending) {
    if (writing.has(key)) continue;
    const due = flushing || p.entries.length >= max || now - p.since >= lingerMs;
    if (!due) wakeAt = Math.min(wakeAt, p.since + lingerMs);
    else if (held(p.user ?? '')) wakeAt = Math.min(wakeAt, now + HELD_RECHECK_MS);
    else return { take: key };
  }
  return wakeAt === Infinity ? undefined : { wakeAt };
}

/** Calls of the same session and owner share records; the queue is shared fairly by user. */
export const userOf = (e: AuditEntry): string => e.owner?.user ?? '';
export const sessionKey = (e: AuditEntry): string => `${e.namespace}/${e.session}/${userOf(e)}`;

export class AuditQueue {
  /** By session, in the order their oldest call was queued. */
  private readonly pending = new Map<string, Pending>();
  /** Calls queued (in `pending`). */
  private queued = 0;
  /**
   * By user: calls queued, the sessions (keys of `pending`) holding them, and the owner their
   * calls share (an owner's groups, up to 64 × 256 characters, held once rather than per call);
   * users with none are absent.
   */
  private readonly users = new Map<string, { calls: number; sessions: Set<string>; owner?: Owner }>();
  private seq = 0;

  constructor(
    private readonly capacity: number,
    private readonly onDrop: (why: QueueDrop) => void,
  ) {}

  /** Calls queued. */
  get length(): number {
    return this.queued;
  }

  /** The queued calls by session, in the order their oldest call was queued. */
  get sessions(): ReadonlyMap<string, { readonly user: string; readonly entries: readonly Queued[]; readonly since: number }> {
    return this.pending;
  }

  /** Calls queued by user; users holding none are absent. */
  holders(): Map<string, number> {
    return new Map([...this.users].map(([user, u]) => [user, u.calls]));
  }

  /**
   * Queues a call at `now`. false when the queue is full and the call's user holds the most of it
   * (the call is not queued); else when full, the largest holder's newest call made room (onDrop).
   */
  add(entry: AuditEntry, now: number): boolean {
    const user = userOf(entry);
    if (this.queued >= this.capacity && !this.evictFor(user)) return false;
    const key = sessionKey(entry);
    const q: Queued = { entry: this.shareOwner(user, entry), seq: this.seq++ };
    const p = this.pending.get(key);
    if (p) p.entries.push(q);
    else this.open(key, { user, entries: [q], since: now });
    this.count(user, 1);
    return true;
  }

  /**
   * Takes the calls of the first due session not in `writing` and not `held` (chooseDue), at most `max`; the rest
   * start a record of their own, queued at `now` (behind the other sessions). Else when to look again.
   */
  takeDue(
    writing: ReadonlySet<string>,
    now: number,
    lingerMs: number,
    max: number,
    flushing: boolean,
    held?: (user: string) => boolean,
  ): { key: string; entries: Queued[] } | { wakeAt: number } | undefined {
    const choice = chooseDue(this.pending, writing, now, lingerMs, max, flushing, held);
    if (choice === undefined || !('take' in choice)) return choice;
    const key = choice.take;
    const p = this.pending.get(key) as Pending;
    const entries = p.entries.splice(0, max);
    this.count(p.user, -entries.length);
    this.pending.delete(key);
    if (p.entries.length > 0) this.pending.set(key, { user: p.user, entries: p.entries, since: now });
    else this.forget(key, p.user);
    return { key, entries };
  }

  /**
   * A failed write's calls (of session `key`) go back first in their session's line, which moves
   * to the end of the queue order, due at once. May leave the queue over its bound: see shed().
   */
  putBack(key: string, batch: Queued[]): void {
    if (batch.length === 0) return;
    const user = userOf((batch[0] as Queued).entry);
    const p = this.pending.get(key);
    this.pending.delete(key);
    if (p) this.pending.set(key, { user, entries: [...batch, ...p.entries], since: 0 });
    else this.open(key, { user, entries: batch, since: 0 });
    this.count(user, batch.length);
  }

  /** Back over the bound after a put-back: the newest calls of the users holding the most go. */
  shed(): void {
    while (this.queued > this.capacity) {
      const user = this.largestHolder();
      if (user === undefined) return;
      this.dropNewestOf(user, 'shed');
    }
  }

  /** Empties the queue (not reported through onDrop); returns how many calls it held. */
  clear(): number {
    const left = this.queued;
    this.pending.clear();
    this.users.clear();
    this.queued = 0;
    return left;
  }

  /** A full queue and a call of `user`: whether the newest call of a user holding more made room for it. */
  private evictFor(user: string): boolean {
    const largest = this.largestHolder();
    if (largest === undefined || (this.users.get(largest)?.calls ?? 0) <= (this.users.get(user)?.calls ?? 0)) return false;
    this.dropNewestOf(largest, 'evicted');
    return true;
  }

  /** The user holding the most queued calls; of several, the one queued most recently. O(users). */
  private largestHolder(): string | undefined {
    let largest: string | undefined;
    let most = 0;
    for (const [user, u] of this.users) if (u.calls > 0 && u.calls >= most) [largest, most] = [user, u.calls];
    return largest;
  }

  /** Drops `user`'s newest queued call: the last of one of its sessions. O(its sessions). */
  private dropNewestOf(user: string, why: QueueDrop): void {
    let newest: { key: string; p: Pending; seq: number } | undefined;
    for (const key of this.users.get(user)?.sessions ?? []) {
      const p = this.pending.get(key) as Pending;
      const seq = (p.entries.at(-1) as Queued).seq;
      if (!newest || seq > newest.seq) newest = { key, p, seq };
    }
    if (!newest) return;
    newest.p.entries.pop();
    this.count(user, -1);
    if (newest.p.entries.length === 0) {
      this.pending.delete(newest.key);
      this.forget(newest.key, user);
    }
    this.onDrop(why);
  }

  /** A session's first calls are queued. */
  private open(key: string, p: Pending): void {
    this.pending.set(key, p);
    const u = this.users.get(p.user);
    if (u) u.sessions.add(key);
    else this.users.set(p.user, { calls: 0, sessions: new Set([key]), ...(p.entries[0]?.entry.owner && { owner: p.entries[0].entry.owner }) });
  }

  /** `entry` with the owner its user's queued calls share, when it is the same (user and groups). */
  private shareOwner(user: string, entry: AuditEntry): AuditEntry {
    const u = this.users.get(user);
    const owner = entry.owner;
    if (!u || !owner) return entry;
    if (u.owner && sameOwner(u.owner, owner)) return u.owner === owner ? entry : { ...entry, owner: u.owner };
    u.owner = owner;
    return entry;
  }

  /** A session holds no queued calls any more (removed from `pending`, its calls counted off). */
  private forget(key: string, user: string): void {
    const u = this.users.get(user);
    u?.sessions.delete(key);
    if (u?.sessions.size === 0) this.users.delete(user);
  }

  private count(user: string, n: number): void {
    this.queued += n;
    const u = this.users.get(user);
    if (u) u.calls += n;
  }
}

function sameOwner(a: Owner, b: Owner): boolean {
  if (a.user !== b.user) return false;
  const ga = a.groups ?? [];
  const gb = b.groups ?? [];
  return ga.length === gb.length && ga.every((g, i) => g === gb[i]) && (a.groups === undefined) === (b.groups === undefined);
}
