// The SandboxRun controller: informers on runs and on the sandbox pods, a work queue, and a
// level-based reconcile that decides — from the object alone — what must happen next.
// Who executes a run: the process whose identity is in the executor annotation. The gateway
// sets it when it creates a run (no extra write); a run created with kubectl has none and is
// claimed by whichever replica first sets it (optimistic concurrency on resourceVersion).
import type { KubernetesObject, V1Pod } from '@kubernetes/client-node';
import { setHeaderOptions } from '@kubernetes/client-node/dist/middleware.js';
import { PatchStrategy } from '@kubernetes/client-node/dist/patch.js';
import type { Logger } from 'pino';
import {
  CONDITION_READY,
  GROUP,
  LABEL_MANAGED_BY,
  MANAGED_BY_VALUE,
  Reasons,
  SANDBOXRUN_KIND,
  SANDBOXRUN_PLURAL,
  VERSION,
  RunPhaseSchema,
  isTerminalPhase,
  normalizeLanguage,
  setCondition,
  parseSandboxRun,
  recallProofOf,
  type SandboxRun,
} from '../api/v1alpha1/index.js';
import { ANNOTATION_CLAIMED_AT, ANNOTATION_EXECUTOR, ANNOTATION_RECOVERING_FROM, AUDIT_EXECUTOR } from '../api/v1alpha1/labels.js';
import { parseCachedRun, type CachedRun } from './cached-run.js';
import { apiErrorMessage, isConflict, isNotFound, type KubeClients } from '../kube/clients.js';
import type { ControllerMetrics } from './metrics.js';
import type { ResilientInformer } from '../kube/informer.js';
import type { ControllerOptions } from './options.js';
import type { RunExecutor } from '../runs/executor.js';
import { invalidRunStatus } from '../runs/status.js';
import { decideRun, lostAfterMs, podsThatMayCarry, ttlRemainingMs } from './run-decision.js';
import type { ReplicaLiveness } from './replica-liveness.js';
import type { RunSlots } from '../limits/run-slots.js';
import { ObjectLoop } from './object-loop.js';
import { reservationMark } from './pool-reservation.js';

const CONTROLLER = 'sandboxrun';

export interface RunControllerDeps {
  clients: KubeClients;
  opts: ControllerOptions;
  log: Logger;
  executor: RunExecutor;
  runs: ResilientInformer<KubernetesObject>;
  pods: ResilientInformer<V1Pod>;
  metrics?: ControllerMetrics;
  now?: () => Date;
  /** Back-pressure: kubectl-created transient runs start only with a free run slot. */
  slots?: RunSlots;
  /** Which other replicas are gone (replica-liveness.ts); without it runs keep only the time budget. */
  liveness?: Pick<ReplicaLiveness, 'liveness'>;
}

/** A Queued run is looked at again at least this often (a freed slot also re-queues it at once). */
const QUEUED_RECHECK_MAX_MS = 5000;
/** A run whose cached copy is behind the API is looked at again after this long (its watch event usually comes first). */
const STALE_CACHE_RECHECK_MS = 1000;

export class SandboxRunController {
  private readonly loop: ObjectLoop;
  private readonly now: () => Date;

  constructor(private readonly d: RunControllerDeps) {
    this.now = d.now ?? (() => new Date());
    this.loop = new ObjectLoop(
      {
        controller: CONTROLLER,
        kind: SANDBOXRUN_KIND,
        workers: 8,
        objects: d.runs,
        pods: d.pods,
        resyncSeconds: d.opts.resyncSeconds,
        log: d.log,
        metrics: d.metrics,
      },
      (key) => this.reconcile(key),
    );
    d.slots?.admission.onCapacity(() => this.requeueQueued());
  }

  start(): void {
    this.loop.start();
  }

  stop(): void {
    this.loop.stop();
  }

  async reconcile(key: string): Promise<{ requeueAfterMs?: number } | void> {
    const [ns = '', name = ''] = key.split('/');
    // The cache holds runs without code and outputs (cached-run.ts): enough to decide.
    const obj = this.d.runs.get(name, ns);
    if (!obj) {
      this.d.executor.forget({ key });
      return;
    }
    if (obj.metadata?.deletionTimestamp) return;
    const now = this.now();
    const parsed = parseCachedRun(obj);
    if (!parsed.ok) {
      // Finished before a stricter schema (an old object): it still goes after its TTL.
      const done = finishedAt(obj);
      if (done === undefined) return this.rejectInvalid(obj, parsed.message);
      const remaining = done + this.d.opts.ttlSecondsAfterFinished * 1000 - now.getTime();
      if (remaining > 0) return { requeueAfterMs: remaining };
      return this.deleteRun(obj);
    }
    const run = parsed.run;

    const uid = run.metadata.uid ?? '';
    // Its outcome is in the cache: no decision below can start it again. The executor still
    // remembers having run it until its budget is over (a status cleared by hand: RunLedger).
    if (isTerminalPhase(run.status?.phase))
      this.d.executor.forgetFinished(uid, lostAfterMs(run, this.d.opts.podStartupTimeoutSeconds, now, this.d.opts.packagesTimeoutSeconds));
    const executor = run.metadata.annotations?.[ANNOTATION_EXECUTOR];
    const auditRecord = executor === AUDIT_EXECUTOR;
    const recoveringFrom = run.metadata.annotations?.[ANNOTATION_RECOVERING_FROM];
    const decision = decideRun(run, {
      identity: this.d.opts.identity,
      executor,
      auditRecord,
      busyHere: this.d.executor.isBusy(uid),
      ranHere: this.d.executor.ranHere(uid),
      creatingHere: this.d.executor.isCreating(key),
      started: this.hasStarted(run),
      ttlRemainingMs: ttlRemainingMs(run, this.d.opts.ttlSecondsAfterFinished, now, this.d.opts.maxTtlSecondsAfterFinished),
      // An audit record's call already ran: it waits for no session.
      lostAfterMs: lostAfterMs(run, this.d.opts.podStartupTimeoutSeconds, now, auditRecord ? 0 : this.d.opts.packagesTimeoutSeconds),
      executorGone: executor !== undefined && this.d.liveness?.liveness(executor) === 'gone',
      ...(recoveringFrom !== undefined && { recoveringFrom }),
    });
    switch (decision.kind) {
      case 'delete':
        return this.deleteRun(obj);
      case 'wait':
        return decision.afterMs === undefined ? undefined : { requeueAfterMs: decision.afterMs };
      case 'execute': {
        // The cache holds runs without their code: read the whole object once to execute it.
        const whole = await this.readRun(ns, name);
        if (!whole) return;
        // Decided from caches, which can be behind the API: after a watch broke (an API server
        // restart), the pod cache can have seen this process delete a finished run's pod while the
        // run cache still shows the run before its outcome — "never started". Only the very object
        // the decision was made on is executed; a newer one waits for the cache to catch up.
        if (whole.metadata.resourceVersion !== run.metadata.resourceVersion) return { requeueAfterMs: STALE_CACHE_RECHECK_MS };
        void this.d.executor.execute(whole);
        return;
      }
      case 'claim': {
        // A kubectl-created transient run takes a run slot first (or waits Queued).
        if (this.d.slots && run.spec.session === undefined) return this.admit(run, this.d.slots, now);
        const claimed = await this.claim(run);
        if (claimed) void this.d.executor.execute(claimed);
        return;
      }
      case 'fail': {
        // An audit record is never claimed (a claimed one would look executable): the
        // resourceVersion of the cached copy lets only one replica close it.
        if (auditRecord) return this.closeAuditRecord(run, decision.message, now);
        // Claim first, so only one replica records the outcome; the claim says it was taken to fail
        // the run, and from whom (kept from an earlier such claim): whatever happens to this
        // process's answer or status write, no later look executes it.
        // No claim time: the run's budget (the recovery's wait) still counts from its first claim.
        const from = recoveringFrom ?? (executor === this.d.opts.identity ? undefined : (executor ?? ''));
        const claimed = await this.claim(run, false, from);
        if (!claimed) return;
        // The pod that carries the run may still know how it ended (its kernel keeps the result):
        // then that is recorded; otherwise the run ends Failed with the decision's message. In the
        // background: the code may still run for up to its timeout, and the run is busy here
        // meanwhile (the executor's settling), so no later look decides again.
        const budget = lostAfterMs(claimed, this.d.opts.podStartupTimeoutSeconds, now, this.d.opts.packagesTimeoutSeconds);
        // The first executor's reserved pods are the ones its early code may have started in ('':
        // there was none).
        const first = from === undefined ? executor : from || undefined;
        void this.d.executor.recover(claimed, this.markerPods(claimed, first), decision.message, budget).then((ended) => {
          if (ended) this.d.metrics?.orphanEnded(ended.phase, ended.reason, normalizeLanguage(claimed.spec.language));
        });
        return;
      }
    }
  }

  /**
   * The durable marker of a run that may have started (run-decision.ts): a pod that carries it —
   * its own cold pod or the pool pod its claim patched, found by owner UID, deleted or not — or a
   * Running status (runs in sessions). Pods are removed only after the outcome is recorded.
   */
  private hasStarted(run: Pick<SandboxRun, 'metadata' | 'status'>): boolean {
    const uid = run.metadata.uid;
    if (run.status?.phase === 'Running' || run.status?.startTime !== undefined) return true;
    return this.d.pods.list(run.metadata.namespace).some((p) => p.metadata?.ownerReferences?.some((o) => o.uid === uid));
  }

  /**
   * The live pods that may carry a run whose executor is gone (podsThatMayCarry): its executor's
   * reserved pods only for a run with a recall proof, the only answers from them that are believed.
   */
  private markerPods(run: Pick<SandboxRun, 'metadata'>, executor: string | undefined): string[] {
    const reservedBy = executor === undefined || recallProofOf(run) === undefined ? undefined : reservationMark(executor);
    return podsThatMayCarry(this.d.pods.list(run.metadata.namespace), run.metadata.uid, reservedBy);
  }

  /** The whole run (with its code), read once when it is about to execute. */
  private async readRun(namespace: string, name: string): Promise<SandboxRun | undefined> {
    try {
      const obj = (await this.d.clients.custom.getNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace,
        plural: SANDBOXRUN_PLURAL,
        name,
      })) as KubernetesObject;
      const parsed = parseSandboxRun(obj);
      if (parsed.ok) return parsed.run;
      await this.rejectInvalid(obj, parsed.message);
      return undefined;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw new Error(`Failed to read SandboxRun ${namespace}/${name}`, { cause: err });
    }
  }

  /**
   * A kubectl-created transient run: claimed and started when this replica has a run slot;
   * otherwise it stays Pending with reason Queued and is looked at again — never dropped, never
   * failed for capacity.
   */
  private async admit(run: CachedRun, slots: RunSlots, now: Date): Promise<{ requeueAfterMs?: number } | void> {
    const ticket = slots.admission.tryAcquire();
    if ('queued' in ticket) {
      await this.markQueued(run, ticket.queued, now);
      return { requeueAfterMs: Math.min(QUEUED_RECHECK_MAX_MS, ticket.retryAfterSeconds * 1000) };
    }
    let claimed: SandboxRun | undefined;
    try {
      claimed = await this.claim(run);
    } finally {
      if (!claimed) ticket.release();
    }
    if (claimed) slots.releaseAfter(ticket, this.d.executor.execute(claimed), claimed.metadata.namespace ?? '', claimed.metadata.name);
  }

  /** Pending/Queued with how full the caps are; written once (resourceVersion guards a stale cache). */
  private async markQueued(run: CachedRun, message: string, now: Date): Promise<void> {
    if (run.status?.reason === Reasons.Queued) return;
    const generation = run.metadata.generation;
    const status = {
      phase: 'Pending',
      reason: Reasons.Queued,
      message,
      observedGeneration: generation,
      // A pending run has no other condition yet (and the cache keeps none): the list starts here.
      conditions: setCondition(undefined, { type: CONDITION_READY, status: 'False', reason: Reasons.Queued, message, observedGeneration: generation }, now),
    };
    if (await this.patchStatusOf(run, status)) {
      this.d.log.info({ sandboxrun: `${run.metadata.namespace}/${run.metadata.name}` }, 'Queued SandboxRun: no free run slot');
    }
  }

  /** An audit record whose writer never wrote its outcome: Failed, so its TTL runs. */
  private async closeAuditRecord(run: CachedRun, message: string, now: Date): Promise<void> {
    const status = { phase: 'Failed', reason: Reasons.ExecFailed, message, completionTime: now.toISOString() };
    await this.patchStatusOf(run, status);
  }

  /**
   * Merge-patches the status of the copy the decision was made on (resourceVersion): false when the
   * run changed meanwhile (claimed, finished) or is gone; the next reconcile sees the new state.
   */
  private async patchStatusOf(run: CachedRun, status: object): Promise<boolean> {
    try {
      await this.d.clients.custom.patchNamespacedCustomObjectStatus(
        {
          group: GROUP,
          version: VERSION,
          namespace: run.metadata.namespace ?? '',
          plural: SANDBOXRUN_PLURAL,
          name: run.metadata.name,
          body: { metadata: { resourceVersion: run.metadata.resourceVersion }, status },
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      return true;
    } catch (err) {
      if (!isConflict(err) && !isNotFound(err)) throw err;
      return false;
    }
  }

  /** A replica is gone: its unfinished runs are looked at now rather than when their budget ends. */
  executorGone(identity: string): void {
    this.loop.addAll((obj) => obj.metadata?.annotations?.[ANNOTATION_EXECUTOR] === identity);
  }

  /** A run slot may be free: look at the Queued runs again now rather than at their requeue time. */
  private requeueQueued(): void {
    this.loop.addAll((obj) => {
      const status = (obj as { status?: { reason?: string } }).status;
      return status?.reason === Reasons.Queued && !obj.metadata?.annotations?.[ANNOTATION_EXECUTOR];
    });
  }

  /**
   * Sets the executor annotation if nobody changed the run meanwhile; undefined if we lost. A claim
   * to execute also sets the claim time, from which the run's budget counts (lostAfterMs).
   */
  private async claim(run: Pick<SandboxRun, 'metadata'>, toExecute = true, recoveringFrom?: string): Promise<SandboxRun | undefined> {
    try {
      const updated: unknown = await this.d.clients.custom.patchNamespacedCustomObject(
        {
          group: GROUP,
          version: VERSION,
          namespace: run.metadata.namespace ?? '',
          plural: SANDBOXRUN_PLURAL,
          name: run.metadata.name,
          body: {
            metadata: {
              resourceVersion: run.metadata.resourceVersion,
              annotations: {
                [ANNOTATION_EXECUTOR]: this.d.opts.identity,
                ...(toExecute && { [ANNOTATION_CLAIMED_AT]: this.now().toISOString() }),
                ...(recoveringFrom !== undefined && { [ANNOTATION_RECOVERING_FROM]: recoveringFrom }),
              },
            },
          },
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      // The patch answers with the whole object: its code is here, no extra read needed.
      const parsed = parseSandboxRun(updated);
      if (!parsed.ok) await this.rejectInvalid(updated as KubernetesObject, parsed.message);
      return parsed.ok ? parsed.run : undefined;
    } catch (err) {
      if (isConflict(err) || isNotFound(err)) return undefined;
      throw new Error(`Failed to claim SandboxRun ${run.metadata.namespace}/${run.metadata.name}`, { cause: err });
    }
  }

  /** A stored object the schema rejects (e.g. written before a validation existed): record why. */
  private async rejectInvalid(obj: KubernetesObject, message: string): Promise<void> {
    const raw = obj as KubernetesObject & { status?: { phase?: string } };
    if (raw.status?.phase === 'Failed') return;
    const status = invalidRunStatus(message, this.now());
    await this.d.clients.custom
      .patchNamespacedCustomObjectStatus(
        {
          group: GROUP,
          version: VERSION,
          namespace: obj.metadata?.namespace ?? '',
          plural: SANDBOXRUN_PLURAL,
          name: obj.metadata?.name ?? '',
          body: { status },
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      )
      .catch((err: unknown) => this.d.log.warn({ err: apiErrorMessage(err) }, 'Failed to record an invalid SandboxRun'));
  }

  /**
   * Deletes the finished run judged past its TTL: that object as this cache has it (uid and
   * resourceVersion preconditions). Another replica may have deleted it already and a run been
   * created since under its name (kubectl, a script's fixed names): that one is not this one's to
   * delete. A changed object (409) is judged again from the newer copy.
   */
  private async deleteRun(obj: KubernetesObject): Promise<{ requeueAfterMs: number } | void> {
    const namespace = obj.metadata?.namespace ?? '';
    const name = obj.metadata?.name ?? '';
    const preconditions = { uid: obj.metadata?.uid, resourceVersion: obj.metadata?.resourceVersion };
    try {
      await this.d.clients.custom.deleteNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace,
        plural: SANDBOXRUN_PLURAL,
        name,
        body: { preconditions },
      });
      this.d.log.info({ sandboxrun: `${namespace}/${name}` }, 'Deleted finished SandboxRun after its TTL');
    } catch (err) {
      if (isConflict(err)) return { requeueAfterMs: 100 };
      if (!isNotFound(err)) throw err;
    }
  }
}

/** completionTime of a terminal run, read without the schema (for objects it rejects). */
function finishedAt(obj: KubernetesObject): number | undefined {
  const status = (obj as { status?: { phase?: unknown; completionTime?: unknown } }).status;
  const phase = RunPhaseSchema.safeParse(status?.phase);
  if (!phase.success || !isTerminalPhase(phase.data)) return undefined;
  const t = typeof status?.completionTime === 'string' ? Date.parse(status.completionTime) : NaN;
  return Number.isNaN(t) ? undefined : t;
}

export function podSelector(): string {
  return `${LABEL_MANAGED_BY}=${MANAGED_BY_VALUE}`;
}
