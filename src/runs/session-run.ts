// A SandboxRun that names a session (spec.session): its code runs in that session's interpreter,
// not in a pod of its own, through the same path as a session call (session-call.ts). Its Running
// status is the marker that its code may have started (a session has no pod of the run's to be
// one): the code is sent only once that status is stored, else the run ends Failed unstarted. Its
// outcome is recorded as the run's status. After its executor stopped, the outcome is
// read back from the session's kernel, which keeps the results of its last keyed calls.
import type { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import { Reasons, normalizeLanguage, type Reason, type SandboxRun, type SandboxRunStatus } from '../api/v1alpha1/index.js';
import { imageCounts } from '../exec/display.js';
import { apiErrorMessage } from '../kube/clients.js';
import type { EventRecorder } from '../kube/events.js';
import type { SessionService } from '../sessions/service.js';
import type { RunRecorder, StatusWrite } from './record.js';
import { callInSession, codeTimes, problemReason, sessionCallRequest } from './session-call.js';
import { sessionOutcome } from './session-outcome.js';
import { completedStatus, EVENT_NOTES, runningStatus, type Classification } from './status.js';
import type { RunMetricsSink, RunOutcome } from './types.js';

export interface SessionRunDeps {
  record: RunRecorder;
  events: EventRecorder;
  /** A busy or starting session is waited for within this start-up allowance of the run's budget. */
  podStartupTimeoutSeconds: number;
  metrics?: RunMetricsSink;
  /** Ends the run Failed before its code ran (executor.ts). */
  /** `note`: the Event's note where the message quotes the sandbox (Classification.note). */
  finishEarly(run: SandboxRun, reason: Reason, message: string, log: Logger, note?: string): Promise<RunOutcome>;
}

/** Why a run's code was not sent to its session: its Running status (the marker) did not land. */
export function notStarted(session: string, marked: Exclude<StatusWrite, 'landed'>): string {
  return marked === 'gone'
    ? `The code was not started: the SandboxRun was deleted before its code was sent to session ${session}. Create the run again to run it.`
    : `The code was not started: the SandboxRun's Running status, the record that its code may have started in session ${session}, could not be written. Check that the gateway may patch sandboxruns/status (its RBAC) and the gateway's log for the error, then run the code again.`;
}

export class SessionRuns {
  private sessions: SessionService | undefined;

  constructor(private readonly d: SessionRunDeps) {}

  setSessions(sessions: SessionService): void {
    this.sessions = sessions;
  }

  /** A SandboxRun with spec.session: the code runs in that session's interpreter (session-call.ts). */
  async run(run: SandboxRun, session: string, output: EventEmitter, log: Logger, started: number): Promise<RunOutcome> {
    if (!this.sessions) return this.d.finishEarly(run, Reasons.InvalidSpec, 'Sessions are not available in this operator.', log);
    const ns = this.d.record.namespaceOf(run);
    const startTime = new Date();
    // The marker that this run's code may have started (run-decision.ts): a run in a session has
    // no pod of its own, so its Running status is written before the code goes to the kernel.
    // Written once, before the code may wait its turn: it says what holds for both (no write when the wait ends).
    const inSession = `The code runs in session ${session} once it is ready and any call running there has finished.`;
    const { podName: _none, ...running } = runningStatus(run, '', startTime, startTime, inSession);
    const marker = { ...running, message: inSession };
    const marked = await this.d.record.patchStatus(run, marker, log);
    // Without the marker nothing in the API says the code may have run, and a restart would run it
    // again: the code goes to the kernel only once the marker is stored.
    if (marked !== 'landed') return this.d.finishEarly(run, Reasons.ExecFailed, notStarted(session, marked), log);
    // A run in a session acts for its owner: only the session's owner's runs may use it.
    const call = await callInSession(
      this.sessions,
      ns,
      {
        ...sessionCallRequest(session, run.spec, {
          // A busy or starting session is waited for within the start-up allowance of the run's
          // budget (lostAfterMs): no other replica declares it lost while it waits and then runs.
          waitUntil: Date.parse(run.metadata.creationTimestamp ?? startTime.toISOString()) + this.d.podStartupTimeoutSeconds * 1000,
          // Its uid, not its name: a name can come back with a new run, whose outcome another's must never be taken for.
          ...(run.metadata.uid && { key: run.metadata.uid }),
        }),
        languageField: 'spec.language',
      },
      (chunk) => output.emit('chunk', chunk),
    );
    if (!call.ok) {
      // A call that failed in the session quotes its kernel (the sandbox's text): not for the Event.
      const note = call.stage === 'failed' ? EVENT_NOTES.sessionCall : undefined;
      return this.d.finishEarly(run, call.reason ?? problemReason[call.stage], `${call.message} ${call.hint}`, log, note);
    }
    const o = call.outcome;
    const { c, status } = await this.recordOutcome(run, o, startTime, log);
    this.d.metrics?.output?.(o.stdoutBytes, o.stderrBytes);
    this.d.metrics?.runFinished(c.phase, c.reason, normalizeLanguage(run.spec.language), (performance.now() - started) / 1000, 'session');
    return {
      ...this.d.record.outcome(run, status),
      session,
      ...(o.result !== undefined && { result: o.result }),
      ...(o.display !== undefined && { display: o.display }),
    };
  }

  /** Records the outcome of `run`'s call in its session (the code waited from `startTime`), as its status and the run's outcome. */
  private async recordOutcome(run: SandboxRun, o: RunOutcome, startTime: Date, log: Logger): Promise<{ c: Classification; status: SandboxRunStatus }> {
    const c: Classification = {
      phase: o.phase,
      reason: (o.reason ?? Reasons.Succeeded) as Classification['reason'],
      message: o.message ?? 'The code ran to completion.',
      ...(o.exitCode !== undefined && { exitCode: o.exitCode }),
      // An exception's message is the program's own text (ename: evalue).
      ...(o.reason === Reasons.Exception && { note: EVENT_NOTES.exception }),
    };
    const status = this.d.record.fit(run, {
      ...completedStatus(
        run,
        c,
        { stdout: o.stdout, stderr: o.stderr, stdoutBytes: o.stdoutBytes, stderrBytes: o.stderrBytes, truncated: o.truncated },
        codeTimes(startTime, o.durationMs),
      ),
      ...imageCounts(o.display),
    });
    await this.d.record.patchStatus(run, status, log);
    this.d.record.recordOutcome(run, c);
    return { c, status };
  }

  /**
   * The outcome of a run in a session whose executor stopped, read back and recorded: its call was
   * sent with the run's uid as key, and the session's kernel keeps the results of its last keyed
   * calls (waited for at most `waitMs`). Undefined when the kernel cannot
   * tell (the session or its pod gone, the call never arrived, or later calls let its result go).
   */
  async recover(run: SandboxRun, session: string, waitMs: number, log: Logger): Promise<Classification | undefined> {
    const uid = run.metadata.uid;
    if (!this.sessions || uid === undefined) return undefined;
    const r = await this.sessions.recall(session, uid, waitMs, run.spec.owner).catch((err: unknown) => {
      log.warn({ err: apiErrorMessage(err) }, 'Failed to read back the call of a SandboxRun in a session');
      return undefined;
    });
    if (!r) return undefined;
    const ns = this.d.record.namespaceOf(run);
    const waitStart = new Date(Date.parse(run.status?.startTime ?? run.metadata.creationTimestamp ?? '') || Date.now());
    const { c } = await this.recordOutcome(run, sessionOutcome(r, ns, run.spec.timeoutSeconds), waitStart, log);
    this.d.events.record(
      { name: run.metadata.name, namespace: ns, uid },
      'Normal',
      'Recovered',
      'Recover',
      `The gateway replica executing this run stopped before it recorded the outcome; the outcome was read back from session ${session}.`,
    );
    log.info({ phase: c.phase, reason: c.reason }, 'Recovered the outcome of a SandboxRun in a session whose executor stopped');
    return c;
  }
}
