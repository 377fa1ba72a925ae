// What this process remembers of the runs it executes: the executions in flight, the writes that go
// on after a caller has its result, every run it started, and the runs it is creating. Only fast
// paths and the last line of "never twice in one process": whether a run may have started is
// decided from the API (src/controller/run-decision.ts), never from this memory, which a restart
// loses. Kept apart from the executor so that the rules on it (what is busy, what drain() waits
// for, when a run is forgotten) sit in one small place, with their own unit tests.
import { EventEmitter } from 'node:events';
import type { RunOutcome } from './types.js';

/** A run executing here: its outcome, and its output for whoever subscribes while it runs. */
export interface Execution {
  promise: Promise<RunOutcome>;
  output: EventEmitter;
}

export class RunLedger {
  private readonly executions = new Map<string, Execution>();
  /**
   * By run uid: the writes that go on after the caller has its result (final status, pod delete,
   * Events). A run in here has its outcome known but maybe not yet stored in its status.
   */
  private readonly settling = new Map<string, Promise<void>>();
  /**
   * Every run this process started (uid → namespace/name), until the controller sees its outcome
   * in the cache or the run is gone (forget). The controller starts a run of this process's own
   * identity that no pod carries (run-decision.ts): one this very process created or claimed but
   * has not started. It decides from its caches and a read of the run that can predate this
   * process's own execution of it — a warm run in the reserved pod writes nothing to the API
   * before its code has ended — so the engine itself must know what it already ran. Measured
   * without it: 1 to 3 of 20 back-to-back warm runs executed twice in bench runs.
   */
  private readonly startedHere = new Map<string, string>();
  /** Finished runs forgotten when their budget is over (forgetAfter). */
  private readonly forgetting = new Set<string>();
  /** Runs whose create this process sent and whose answer it has not handled yet (creating()). */
  private readonly creatingKeys = new Set<string>();
  /** Executions of runs being created (executeWhileCreating) in flight: drain() waits for them. */
  private readonly creatingRuns = new Set<Promise<unknown>>();

  /** Executing here now, or its outcome not yet stored. */
  isBusy(uid: string): boolean {
    return this.executions.has(uid) || this.settling.has(uid);
  }

  /** Marks `namespace/name` as being created here; the returned function ends the mark. */
  creating(key: string): () => void {
    this.creatingKeys.add(key);
    return () => this.creatingKeys.delete(key);
  }

  isCreating(key: string): boolean {
    return this.creatingKeys.has(key);
  }

  /** The execution of run `uid` in flight here, if any. */
  execution(uid: string): Execution | undefined {
    return this.executions.get(uid);
  }

  /** Whether this process started run `uid` (and has not been told to forget it). */
  startedAlready(uid: string): boolean {
    return this.startedHere.has(uid);
  }

  /**
   * Records that run `uid` (`key`: namespace/name) starts here, then starts it: `body` with a
   * fresh output emitter. Its execution is tracked until it settles, when the output's listeners go.
   */
  start(uid: string, key: string, body: (output: EventEmitter) => Promise<RunOutcome>): Execution {
    this.startedHere.set(uid, key);
    const output = new EventEmitter();
    output.setMaxListeners(0);
    const promise = body(output).finally(() => {
      if (this.executions.get(uid) === execution) this.executions.delete(uid);
      output.removeAllListeners();
    });
    const execution: Execution = { promise, output };
    this.executions.set(uid, execution);
    return execution;
  }

  /** Tracks the writes after run `uid`'s outcome (`p` must not reject: the caller logs its failure). */
  settle(uid: string, p: Promise<void>): void {
    const tracked = p.finally(() => {
      if (this.settling.get(uid) === tracked) this.settling.delete(uid);
    });
    this.settling.set(uid, tracked);
  }

  /** Those writes for run `uid`, while they go on. */
  settled(uid: string): Promise<void> | undefined {
    return this.settling.get(uid);
  }

  /** Tracks an execution of a run being created until it settles (drain() waits for it). */
  whileCreating<T>(p: Promise<T>): Promise<T> {
    this.creatingRuns.add(p);
    void p.catch(() => undefined).finally(() => this.creatingRuns.delete(p));
    return p;
  }

  /**
   * This process need not remember having run it any more: the run is gone (its namespace/name),
   * or its outcome was seen and its budget is over (its uid: forgetAfter).
   */
  forget(run: { uid?: string; key?: string }): void {
    if (run.uid !== undefined) this.startedHere.delete(run.uid);
    if (run.key === undefined) return;
    for (const [uid, key] of this.startedHere) if (key === run.key) this.startedHere.delete(uid);
  }

  /**
   * Forgets finished run `uid` once `ms` are over (at once when none are), however often asked
   * meanwhile: the controller sees its outcome on every look, and a status cleared by hand within
   * the run's budget would make it look unstarted, which this memory answers (startedAlready).
   */
  forgetAfter(uid: string, ms: number): void {
    if (ms <= 0) return this.forget({ uid });
    if (this.forgetting.has(uid)) return;
    this.forgetting.add(uid);
    setTimeout(() => {
      this.forgetting.delete(uid);
      this.forget({ uid });
    }, ms).unref();
  }

  /** Waits until nothing is in flight, including what starts while it waits. */
  async drain(): Promise<void> {
    while (this.executions.size > 0 || this.settling.size > 0 || this.creatingRuns.size > 0) {
      await Promise.allSettled([...this.creatingRuns]);
      await Promise.allSettled([...this.executions.values()].map((e) => e.promise));
      await Promise.allSettled([...this.settling.values()]);
    }
  }
}
