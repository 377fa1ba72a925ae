// spec.packages installs of starting sessions, run beside the session controller's workers rather
// than inside a reconcile: an install may take minutes (CODEMODE_PACKAGES_TIMEOUT_SECONDS), and the
// controller has four workers for every session of the namespace, so a few slow installs would
// hold up every other session's start, loss and idle collection meanwhile. In memory only: a
// replica that takes over mid-install installs again, which only rewrites the same files.
import type { SandboxSession } from '../api/v1alpha1/index.js';
import type { InstallResult } from '../packages/installer.js';

export type InstallDone = { ok: true; result: InstallResult } | { ok: false; error: unknown };

type Install = (session: SandboxSession, pod: string, packages: readonly string[]) => Promise<InstallResult>;

export class SessionInstalls {
  /** By work-queue key; `uid` tells a session from a later one of the same name. */
  private readonly byKey = new Map<string, { uid: string | undefined; done?: InstallDone }>();

  constructor(
    private readonly install: Install,
    /** Queues the session's key once its install has ended. */
    private readonly wake: (key: string) => void,
  ) {}

  /**
   * The outcome of the session's install, started now if none is known and `start` allows:
   * undefined while it runs (or, not started, while another replica's does).
   */
  poll(key: string, session: SandboxSession, pod: string, start = true): InstallDone | undefined {
    const known = this.byKey.get(key);
    if (known && known.uid === session.metadata.uid) return known.done;
    if (!start) return undefined;
    const entry: { uid: string | undefined; done?: InstallDone } = { uid: session.metadata.uid };
    this.byKey.set(key, entry);
    const started = Promise.resolve().then(() => this.install(session, pod, session.spec.packages ?? []));
    void started
      .then(
        (result) => (entry.done = { ok: true, result }),
        (error: unknown) => (entry.done = { ok: false, error }),
      )
      .finally(() => {
        if (this.byKey.get(key) === entry) this.wake(key);
      });
    return undefined;
  }

  /** The session's install is recorded in its status, or the session is gone: its entry goes. */
  forget(key: string): void {
    this.byKey.delete(key);
  }

  /** Installs known (for tests and leaks). */
  get size(): number {
    return this.byKey.size;
  }
}
