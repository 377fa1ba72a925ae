// Install slots: how many package installs one gateway process runs at once, and whose share
// each counts against (src/packages/installer.ts takes one per install). Pure bookkeeping.
import { PackageError } from './policy.js';

/**
 * Installs one gateway process runs at once: each is a pod of up to 1 CPU and 1 GiB, so a caller
 * looping over install_packages gets a clear refusal rather than filling the node with fetchers.
 * One holder (a session's owner, or an ownerless session itself: installSlotKey) holds at most half
 * of them: the rest stay for everyone else.
 */
export const MAX_CONCURRENT_INSTALLS = 4;
export const MAX_INSTALLS_PER_USER = MAX_CONCURRENT_INSTALLS / 2;

const USER_KEY = 'user:';
const SESSION_KEY = 'session:';

/**
 * Whose share an install counts against: the session's owner (spec.owner.user), or — for a session
 * without one (no authentication configured, or made with kubectl) — the session itself. Were all
 * ownerless sessions one key, together they could only ever use one user's share of the server.
 * The prefixes keep the two kinds apart: a user may be named anything, `session:ns/s` too, and
 * their key is still `user:session:ns/s`.
 */
export function installSlotKey(t: { user?: string; namespace: string; sessionLabel: string }): string {
  return t.user !== undefined ? `${USER_KEY}${t.user}` : `${SESSION_KEY}${t.namespace}/${t.sessionLabel}`;
}

/**
 * An install refused for want of a slot (InstallSlots.take): nothing about the packages, only the
 * moment. A tool call reports it as any failure; the session controller tries again later rather
 * than failing a starting session for it.
 */
export class InstallSlotsFull extends PackageError {
  constructor(message: string, hint: string) {
    super(message, hint, 'failed');
    this.name = 'InstallSlotsFull';
  }
}

/** The install slots of one gateway process, by holder (installSlotKey). Pure bookkeeping. */
export class InstallSlots {
  private running = 0;
  private readonly byHolder = new Map<string, number>();

  /** A slot for `key` (installSlotKey), released once; or the refusal. */
  take(key: string): { release(): void } | InstallSlotsFull {
    const mine = this.byHolder.get(key) ?? 0;
    if (this.running >= MAX_CONCURRENT_INSTALLS)
      return new InstallSlotsFull(`${MAX_CONCURRENT_INSTALLS} installs are running on this server already.`, 'Try again in a moment.');
    if (mine >= MAX_INSTALLS_PER_USER)
      return new InstallSlotsFull(
        `${MAX_INSTALLS_PER_USER} installs ${key.startsWith(SESSION_KEY) ? 'in this session' : 'of yours'} are running already (this server runs ${MAX_CONCURRENT_INSTALLS} at once, for everyone).`,
        'Wait for one of them to finish.',
      );
    this.running++;
    this.byHolder.set(key, mine + 1);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.running--;
        const left = (this.byHolder.get(key) ?? 1) - 1;
        if (left > 0) this.byHolder.set(key, left);
        else this.byHolder.delete(key);
      },
    };
  }
}
