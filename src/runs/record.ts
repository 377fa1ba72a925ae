// Writes a run's record: its status (retried while it may land, cut to fit etcd), its Events, and the
// RunOutcome callers get from the same status. The marker that a run's code started (its pod, or a
// Running status for a run in a session) is removed by the executor only after this has landed.
import { setHeaderOptions } from '@kubernetes/client-node/dist/middleware.js';
import { PatchStrategy } from '@kubernetes/client-node/dist/patch.js';
import type { Logger } from 'pino';
import {
  GROUP,
  NOT_STORED_REFUSED,
  SANDBOXRUN_PLURAL,
  VERSION,
  fitStatus,
  isMinimalStatus,
  minimalStatus,
  type Runtime,
  type SandboxRun,
  type SandboxRunStatus,
} from '../api/v1alpha1/index.js';
import type { EventRecorder } from '../kube/events.js';
import { apiErrorMessage, isConflict, isNotFound, isTooLarge, retryable, type KubeClients } from '../kube/clients.js';
import { runningStatus, type Classification } from './status.js';
import type { RunOutcome } from './types.js';

/** A run still executing after this long gets its Running status written (markRunningLater). */
export const RUNNING_WRITE_DELAY_MS = 250;
/** Longest pause between attempts to record a run's status (retried while it may still land). */
const MAX_STATUS_RETRY_MS = 30_000;

/**
 * What became of a status write (patchStatus): `landed` — stored, or after a refusal its minimal
 * form (phase, reason, message; outputs cut); `gone` — the run no longer exists (deleted meanwhile,
 * or here as too large to record); `refused` — it cannot be stored, and was given up.
 */
export type StatusWrite = 'landed' | 'gone' | 'refused';

export interface RunRecorderDeps {
  clients: KubeClients;
  events: EventRecorder;
  /** The namespace of runs whose metadata does not say (the operator's). */
  namespace: string;
  /** Per stream, UTF-8 bytes kept in SandboxRun status. */
  outputCapBytes: number;
}

export class RunRecorder {
  constructor(private readonly d: RunRecorderDeps) {}

  namespaceOf(run: SandboxRun): string {
    return run.metadata.namespace ?? this.d.namespace;
  }

  /**
   * Merge-patches .status, retrying what may still land: a finished run must be recorded (its pod,
   * the marker that it started, is deleted only afterwards). A conflict, 429, 5xx or no answer is
   * retried with a capped backoff for as long as this process lives. What fails the same way every
   * time (refused as invalid or not allowed, or an error before the request left) gets a minimal
   * status (outputs cut) once, then is given up; a status too large for etcd gets a minimal one,
   * then the run is deleted (deleteUnrecordable). A run deleted meanwhile is not an error. The
   * result says which: the writer of a marker must not start the code unless it landed.
   */
  async patchStatus(run: SandboxRun, wanted: SandboxRunStatus, log: Logger): Promise<StatusWrite> {
    let status = this.fit(run, wanted);
    let refused = false;
    for (let attempt = 1; ; attempt++) {
      try {
        await this.d.clients.custom.patchNamespacedCustomObjectStatus(
          { group: GROUP, version: VERSION, namespace: this.namespaceOf(run), plural: SANDBOXRUN_PLURAL, name: run.metadata.name, body: { status } },
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        );
        return 'landed';
      } catch (err) {
        if (isNotFound(err)) return 'gone';
        // Larger than etcd takes (our size model missed something): record at least the outcome.
        if (isTooLarge(err)) {
          if (!isMinimalStatus(status)) {
            status = minimalStatus(status);
            continue;
          }
          return this.deleteUnrecordable(run, log);
        }
        if (retryable(err) || isConflict(err)) {
          if (attempt === 1 || attempt % 10 === 0) log.warn({ err: apiErrorMessage(err), attempt }, 'Failed to update SandboxRun status; retrying');
          await new Promise((r) => setTimeout(r, Math.min(MAX_STATUS_RETRY_MS, 100 * 2 ** attempt)));
          continue;
        }
        // It would fail the same way for ever (retrying would loop for the process's life): the
        // minimal status once, then give up. The log never quotes the status (it holds output).
        if (!refused) {
          refused = true;
          log.warn({ err: apiErrorMessage(err) }, 'Failed to write SandboxRun status, which is not retried; writing a minimal one');
          status = minimalStatus(status, NOT_STORED_REFUSED);
          continue;
        }
        log.error({ err: apiErrorMessage(err) }, 'Failed to record the status of a SandboxRun; giving up');
        return 'refused';
      }
    }
  }

  /** The Event that tells `kubectl describe` readers how the run ended. */
  recordOutcome(run: SandboxRun, c: Pick<Classification, 'phase' | 'reason' | 'message' | 'note'>): void {
    const target = { name: run.metadata.name, namespace: this.namespaceOf(run), uid: run.metadata.uid };
    const type = c.phase === 'Succeeded' ? 'Normal' : 'Warning';
    this.d.events.record(target, type, c.phase === 'TimedOut' ? 'TimedOut' : c.phase, 'Complete', c.note ?? c.message);
  }

  /**
   * A short run costs no write while it executes: the Running status and the Started Event are
   * written only for code still executing after RUNNING_WRITE_DELAY_MS (`before` is called first).
   * `stop()` when the code ended; `written()` is the Running write, if one was sent.
   */
  markRunningLater(
    run: SandboxRun,
    podName: string,
    runtime: Runtime,
    startTime: Date,
    log: Logger,
    before?: () => void,
  ): { stop(): void; written(): Promise<void> } {
    let stopped = false;
    let write: Promise<void> = Promise.resolve();
    const timer = setTimeout(() => {
      if (stopped) return;
      before?.();
      // A pod run's marker is its pod, not this status: what became of the write does not matter here.
      write = this.patchStatus(run, runningStatus(run, podName, startTime, new Date()), log).then(() => undefined);
      this.d.events.record(
        { name: run.metadata.name, namespace: this.namespaceOf(run), uid: run.metadata.uid },
        'Normal',
        'Started',
        'Execute',
        `Executing ${runtime} code in pod ${podName}.`,
      );
    }, RUNNING_WRITE_DELAY_MS);
    return {
      stop: () => {
        stopped = true;
        clearTimeout(timer);
      },
      written: () => write,
    };
  }

  /** What is stored (and returned): outputs cut to the byte cap and to what fits in etcd. */
  fit(run: SandboxRun, status: SandboxRunStatus): SandboxRunStatus {
    return fitStatus(run, status, this.d.outputCapBytes);
  }

  /** The caller's view of a recorded status. */
  outcome(run: SandboxRun, s: SandboxRunStatus): RunOutcome {
    const phase = s.phase === 'Succeeded' || s.phase === 'TimedOut' ? s.phase : 'Failed';
    return {
      runName: run.metadata.name,
      namespace: this.namespaceOf(run),
      phase,
      exitCode: s.exitCode,
      stdout: s.stdout ?? '',
      stderr: s.stderr ?? '',
      truncated: s.truncated ?? false,
      stdoutBytes: s.stdoutBytes ?? 0,
      stderrBytes: s.stderrBytes ?? 0,
      durationMs: s.durationMs,
      reason: s.reason,
      message: s.message,
    };
  }

  /**
   * A run within a few hundred bytes of etcd's limit cannot take even a minimal status: left
   * alone it would never finish nor expire. Delete it and say why in an Event.
   */
  private async deleteUnrecordable(run: SandboxRun, log: Logger): Promise<StatusWrite> {
    const ns = this.namespaceOf(run);
    log.warn('Deleted SandboxRun: it is too large to record its result');
    this.d.events.record(
      { name: run.metadata.name, namespace: ns, uid: run.metadata.uid },
      'Warning',
      'TooLarge',
      'Delete',
      'The SandboxRun is too large to store its result (etcd request limit); it was deleted. Send smaller code, stdin or annotations.',
    );
    return this.d.clients.custom
      .deleteNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: SANDBOXRUN_PLURAL, name: run.metadata.name })
      .then(
        (): StatusWrite => 'gone',
        (err: unknown): StatusWrite => {
          if (isNotFound(err)) return 'gone';
          log.error({ err: apiErrorMessage(err) }, 'Failed to delete an unrecordable SandboxRun');
          return 'refused';
        },
      );
  }
}
