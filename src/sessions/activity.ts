// What the gateway writes to a session's status: its activity (lastActivityTime and runCount, which
// idle garbage collection reads, so it works across gateway restarts and replicas), throttled and
// off the call's critical path, and a dead interpreter (kernelLost). Each under its own field
// manager (src/api/v1alpha1/field-managers.ts): the controller owns the rest of the status.
import type { Logger } from 'pino';
import { GATEWAY_FIELD_MANAGER, GATEWAY_LOST_FIELD_MANAGER, type SandboxSession } from '../api/v1alpha1/index.js';
import { apiErrorMessage, isConflict, isNotFound } from '../kube/clients.js';
import { cutUnits, withoutControls } from '../util/text.js';
import type { SessionStore } from './store.js';

/** Longest kernelLost.message written, in UTF-16 code units (the API's schema and the CRD allow 1024). */
export const KERNEL_LOST_MAX = 1000;

/**
 * `why` as kernelLost.message: control characters (a terminal's escape sequences, line breaks: it
 * quotes the sandbox) as spaces, cut to KERNEL_LOST_MAX code units without splitting a surrogate
 * pair. Code points would let astral text pass the schema's bound (code units) twice over, and a
 * session whose status fails the schema is invisible to the gateway.
 */
export function lostMessage(why: string): string {
  return cutUnits(withoutControls(why), KERNEL_LOST_MAX);
}

/** Writes at most one activity update per session per this interval. */
export const ACTIVITY_WRITE_INTERVAL_MS = 1000;

/** The longest pause between activity writes while a call runs (keepAlive). */
export const KEEPALIVE_MAX_MS = 60_000;

/**
 * Pure: how often a call in progress renews its session's lastActivityTime — four times per idle
 * timeout (the writes go through the API server and may be late), at most KEEPALIVE_MAX_MS apart.
 */
export function keepAliveMs(idleTimeoutSeconds: number): number {
  return Math.max(ACTIVITY_WRITE_INTERVAL_MS, Math.min(KEEPALIVE_MAX_MS, (idleTimeoutSeconds * 1000) / 4));
}

/** The session a write is for: its name, and its uid (a session of the same name made later is another). */
interface SessionRef {
  metadata: { name: string; uid?: string };
}

/** Tries of a kernelLost write whose cached copy was older than the stored one, 50 ms apart. */
const LOST_ATTEMPTS = 20;

export class SessionActivity {
  /** `dirty`: activity not written yet, whether or not it added calls (a file operation, the keep-alive). */
  private readonly pending = new Map<
    string,
    { uid: string | undefined; calls: number; dirty: boolean; timer?: NodeJS.Timeout; writing: boolean; lastWrite: number }
  >();

  constructor(
    private readonly store: SessionStore,
    private readonly log: Logger,
  ) {}

  /**
   * Records activity in status.lastActivityTime (and `calls` more in runCount), at most once per
   * interval per session and never on the call's critical path. Conflicting writers retry on the
   * latest copy. Only on the session `s` is: a session deleted and made again under its name (by
   * another replica or kubectl) within the interval is another session, and gets none of it.
   */
  note(s: SessionRef, calls: number): void {
    const name = s.metadata.name;
    const uid = s.metadata.uid;
    let a = this.pending.get(name);
    if (!a) this.pending.set(name, (a = { uid, calls: 0, dirty: false, writing: false, lastWrite: 0 }));
    else if (a.uid !== uid) Object.assign(a, { uid, calls: 0 });
    a.calls += calls;
    a.dirty = true;
    if (a.timer || a.writing) return;
    const wait = Math.max(0, a.lastWrite + ACTIVITY_WRITE_INTERVAL_MS - Date.now());
    a.timer = setTimeout(() => void this.flush(name), wait);
    a.timer.unref();
  }

  /**
   * Renews the session's activity while a call runs there, until the returned function is called.
   * Idle collection reads only lastActivityTime (the controller cannot see calls in progress), so
   * a call longer than the session's idle timeout would otherwise have its session, and its pod,
   * deleted under it.
   */
  keepAlive(s: SessionRef & { spec: Pick<SandboxSession['spec'], 'idleTimeoutSeconds'> }): () => void {
    const timer = setInterval(() => this.note(s, 0), keepAliveMs(s.spec.idleTimeoutSeconds));
    timer.unref();
    return () => clearInterval(timer);
  }

  /**
   * Reports the dead interpreter (kernelLost); the controller turns it into phase Lost. Written on
   * the copy of `s` in the cache, guarded by its resourceVersion: never on a session made again
   * under the name since (another interpreter, alive), which the status subresource would not
   * tell apart by uid.
   */
  async markLost(s: SessionRef, why: string): Promise<void> {
    const kernelLost = { message: lostMessage(why), time: new Date().toISOString() };
    const name = s.metadata.name;
    try {
      if ((await this.applyOnCached(name, s.metadata.uid, GATEWAY_LOST_FIELD_MANAGER, () => ({ kernelLost }), LOST_ATTEMPTS)) === 'conflicting')
        this.log.warn({ sandboxsession: name }, 'Failed to mark session lost: its status kept changing');
    } catch (err) {
      if (!isNotFound(err)) this.log.warn({ err: apiErrorMessage(err), sandboxsession: name }, 'Failed to mark session lost');
    }
  }

  private async flush(name: string): Promise<void> {
    const a = this.pending.get(name);
    if (!a) return;
    a.timer = undefined;
    a.writing = true;
    const { uid, calls } = a;
    a.calls = 0;
    a.dirty = false;
    // Calls not yet added to runCount: they go back to the pending count unless written (or the
    // session is gone), so a write that kept conflicting or failed never loses them — the next
    // flush, an interval later, adds them.
    let unwritten = true;
    try {
      // The resourceVersion makes the increment conditional: two replicas cannot both add to the
      // same runCount. expiresAt follows from lastActivityTime; the controller writes it. Gone, or
      // made again under the name: the calls were another session's.
      const status = (cur: SandboxSession): Record<string, unknown> => ({
        lastActivityTime: new Date().toISOString(),
        runCount: (cur.status?.runCount ?? 0) + calls,
      });
      unwritten = (await this.applyOnCached(name, uid, GATEWAY_FIELD_MANAGER, status, 3)) === 'conflicting';
    } catch (err) {
      if (isNotFound(err)) unwritten = false;
      else this.log.warn({ err: apiErrorMessage(err), sandboxsession: name }, 'Failed to record session activity');
    } finally {
      // Unwritten activity is written again an interval later, calls or not: a session whose last
      // use was a file operation would otherwise be collected an idle timeout early.
      if (unwritten && a.uid === uid) {
        a.calls += calls;
        a.dirty = true;
      }
      a.writing = false;
      a.lastWrite = Date.now();
      if (a.dirty) this.note({ metadata: { name, uid: a.uid } }, 0);
      else this.pending.delete(name);
    }
  }

  /**
   * Applies `status(copy)` to session `name`'s status as `manager`, on the cached copy and only
   * while it is the session of `uid`, guarded by the copy's resourceVersion. A conflict (the cache
   * behind the store) waits 50 ms for the watch to bring the new copy, at most `attempts` times
   * ('conflicting' then). 'gone': no such session, or another made under its name. Throws whatever
   * else the API server answers.
   */
  private async applyOnCached(
    name: string,
    uid: string | undefined,
    manager: string,
    status: (copy: SandboxSession) => Record<string, unknown>,
    attempts: number,
  ): Promise<'written' | 'gone' | 'conflicting'> {
    for (let attempt = 0; attempt < attempts; attempt++) {
      const cur = this.store.get(name);
      if (!cur || cur.metadata.uid !== uid) return 'gone';
      try {
        await this.store.applyStatus(name, manager, status(cur), cur.metadata.resourceVersion);
        return 'written';
      } catch (err) {
        if (!isConflict(err)) throw err;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    return 'conflicting';
  }
}
