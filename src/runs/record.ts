// Writes a run's record: its status (retried until it lands, cut to fit etcd), its Events, and the
// RunOutcome callers get from the same status. The marker that a run's code started (its pod, or a
// Running status for a run in a session) is removed by the executor only after this has landed.
import { setHeaderOptions } from '@kubernetes/client-node/dist/middleware.js';
import { PatchStrategy } from '@kubernetes/client-node/dist/patch.js';
import type { Logger } from 'pino';
import { GROUP, SANDBOXRUN_PLURAL, VERSION, fitStatus, minimalStatus, type Runtime, type SandboxRun, type SandboxRunStatus } from '../api/v1alpha1/index.js';
import type { EventRecorder } from '../kube/events.js';
import { apiErrorMessage, isNotFound, isTooLarge, statusOf, type KubeClients } from '../kube/clients.js';
import { runningStatus, type Classification } from './status.js';
import type { RunOutcome } from './types.js';

/** A run still executing after this long gets its Running status written (markRunningLater). */
export const RUNNING_WRITE_DELAY_MS = 250;
/** Longest pause between attempts to record a finished run's status (it is retried until it lands). */
const MAX_STATUS_RETRY_MS = 30_000;

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
   * Merge-patches .status until it lands: a finished run must be recorded (its pod, the marker that
   * it started, is deleted only afterwards). Transient failures are retried with a capped backoff for
   * as long as this process lives; a status the API server refuses as too large or invalid is
   * replaced by a minimal one (outputs cut) once. A run deleted meanwhile is not an error.
   */
  async patchStatus(run: SandboxRun, wanted: SandboxRunStatus, log: Logger): Promise<void> {
    let status = this.fit(run, wanted);
    let refused = false;
    for (let attempt = 1; ; attempt++) {
      try {
        await this.d.clients.custom.patchNamespacedCustomObjectStatus(
          { group: GROUP, version: VERSION, namespace: this.namespaceOf(run), plural: SANDBOXRUN_PLURAL, name: run.metadata.name, body: { status } },
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        );
        return;
      } catch (err) {
        if (isNotFound(err)) return;
        // Larger than etcd takes (our size model missed something): record at least the outcome.
        if (isTooLarge(err)) {
          if (status.conditions !== null) {
            status = minimalStatus(status);
            continue;
          }
          return this.deleteUnrecordable(run, log);
        }
        const code = statusOf(err);
        if (code !== undefined && code >= 400 && code < 500 && code !== 409 && code !== 429) {
          // Refused as invalid: the minimal status once, then give up (it can never land).
          if (!refused) {
            refused = true;
            log.warn({ err: apiErrorMessage(err) }, 'SandboxRun status refused; writing a minimal one');
            status = minimalStatus(status);
            continue;
          }
          log.error({ err: apiErrorMessage(err) }, 'Failed to record the outcome of a SandboxRun');
          return;
        }
        if (attempt === 1 || attempt % 10 === 0) log.warn({ err: apiErrorMessage(err), attempt }, 'Failed to update SandboxRun status; retrying');
        await new Promise((r) => setTimeout(r, Math.min(MAX_STATUS_RETRY_MS, 100 * 2 ** attempt)));
      }
    }
  }

  /** The Event that tells `kubectl describe` readers how the run ended. */
  recordOutcome(run: SandboxRun, c: Pick<Classification, 'phase' | 'reason' | 'message' | 'note'>): void {
    const target = { name: run.metadata.name, namespace: this.namespaceOf(run), uid: run.metadata.uid };
    const type = c.phase === 'Succeeded' ? 'Normal' : 'Warning';
    this.d.events.record(target, type, c.phase === 'TimedOut' ? 'TimedOut' : c.phase, 'Complete', c.note ?? c.message);
  }

  /** What is stored (and returned): outputs cut to the byte cap and to what fits in etcd. */
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
      write = this.patchStatus(run, runningStatus(run, podName, startTime, new Date()), log);
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
  private async deleteUnrecordable(run: SandboxRun, log: Logger): Promise<void> {
    const ns = this.namespaceOf(run);
    log.warn('Deleted SandboxRun: it is too large to record its result');
    this.d.events.record(
      { name: run.metadata.name, namespace: ns, uid: run.metadata.uid },
      'Warning',
      'TooLarge',
      'Delete',
      'The SandboxRun is too large to store its result (etcd request limit); it was deleted. Send smaller code, stdin or annotations.',
    );
    await this.d.clients.custom
      .deleteNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: SANDBOXRUN_PLURAL, name: run.metadata.name })
      .catch((err: unknown) => {
        if (!isNotFound(err)) log.error({ err: apiErrorMessage(err) }, 'Failed to delete an unrecordable SandboxRun');
      });
  }
}
