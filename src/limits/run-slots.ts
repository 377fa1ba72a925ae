// The Kubernetes side of run admission: what other replicas execute (counted from the SandboxRun
// informer cache every replica shares) and when a run's slot is really free: its final status is
// in the cache (so no replica counts it any more) and its sandbox pod is terminating or gone (as
// the API server's ResourceQuota counts pods). So a replica never has more run pods than its cap,
// even for the moment between one run's end and the next one's start.
import type { KubernetesObject, V1Pod } from '@kubernetes/client-node';
import { ANNOTATION_EXECUTOR, LABEL_RUN } from '../api/v1alpha1/labels.js';
import type { ResilientInformer } from '../kube/informer.js';
import { runLabelValue } from '../sandbox/names.js';
import { RunAdmission, type RunAdmissionDeps, type Ticket } from './admission.js';

const TERMINAL = new Set(['Succeeded', 'Failed', 'TimedOut']);
/** A slot is freed at the latest this long after its run ended, pod seen gone or not. */
const RELEASE_WAIT_MS = 15_000;

interface RunLike extends KubernetesObject {
  spec?: { session?: unknown };
  status?: { phase?: unknown; podName?: unknown };
}

/**
 * Transient runs another replica executes: not finished, not being deleted, claimed by an executor
 * other than `identity`, and not in a session (those use the session's pod). Runs nobody claimed
 * yet (kubectl-created, possibly Queued) do not count: they hold no pod.
 */
export function countOthersActive(runs: readonly KubernetesObject[], identity: string): number {
  let n = 0;
  for (const obj of runs as readonly RunLike[]) {
    const executor = obj.metadata?.annotations?.[ANNOTATION_EXECUTOR];
    if (executor === undefined || executor === identity || obj.metadata?.deletionTimestamp) continue;
    if (obj.spec?.session !== undefined || TERMINAL.has(String(obj.status?.phase))) continue;
    n++;
  }
  return n;
}

/** A pod that still holds capacity: not terminating, not finished (the ResourceQuota's view). */
export function holdsCapacity(pod: V1Pod): boolean {
  return !pod.metadata?.deletionTimestamp && pod.status?.phase !== 'Succeeded' && pod.status?.phase !== 'Failed';
}

/**
 * Whether a run still takes a slot as every replica sees it: its SandboxRun is not yet terminal in
 * the informer cache (other replicas count it from there), or its pod still holds capacity: the
 * pod labelled with the run, or the one its status names (a short warm run's reserved pool pod is
 * deleted without ever being labelled with its run, src/runs/warm-claims.ts).
 */
export function takesSlot(run: RunLike | undefined, pods: readonly V1Pod[], label: string): boolean {
  if (run && !run.metadata?.deletionTimestamp && !TERMINAL.has(String(run.status?.phase))) return true;
  const podName = typeof run?.status?.podName === 'string' ? run.status.podName : undefined;
  return pods.some((p) => (p.metadata?.labels?.[LABEL_RUN] === label || (podName !== undefined && p.metadata?.name === podName)) && holdsCapacity(p));
}

/** Run slots of this replica: the admission queue plus release-when-really-finished. */
export class RunSlots {
  readonly admission: RunAdmission;
  private readonly waiters = new Map<string, Set<() => void>>();

  constructor(
    private readonly runs: ResilientInformer<KubernetesObject>,
    private readonly pods: ResilientInformer<V1Pod>,
    identity: string,
    deps: Omit<RunAdmissionDeps, 'othersActive'>,
    /** A slot is freed at the latest this long after its run ended (tests lengthen it). */
    private readonly releaseWaitMs = RELEASE_WAIT_MS,
  ) {
    this.admission = new RunAdmission({ ...deps, othersActive: () => countOthersActive(this.runs.list(deps.namespace), identity) });
    runs.onChange((run) => {
      this.wake(run.metadata?.namespace, runLabelValue(run.metadata?.name ?? ''));
      // Another replica's run ending frees namespace capacity: let waiting calls re-check.
      this.admission.poke();
    });
    pods.onChange((pod) => {
      const label = pod.metadata?.labels?.[LABEL_RUN];
      // A pod without the label may be the one a run's status names: its namespace's waiters check.
      if (label !== undefined) this.wake(pod.metadata?.namespace, label);
      else this.wakeNamespace(pod.metadata?.namespace);
    });
  }

  /**
   * Frees `ticket` once `done` settled, the run's final status is in the cache and its pod no
   * longer holds capacity (at most RELEASE_WAIT_MS after `done`): until then the next run would
   * make one pod too many, and other replicas would still count this one.
   */
  releaseAfter(ticket: Ticket, done: Promise<unknown>, namespace: string, runName: string): void {
    void done
      .catch(() => undefined)
      .then(() => this.released(namespace, runName))
      .finally(() => ticket.release());
  }

  private wake(namespace: string | undefined, label: string | undefined): void {
    if (label !== undefined) this.waiters.get(`${namespace}/${label}`)?.forEach((w) => w());
  }

  /** Every waiter of a namespace (at most this replica's runs still finishing). */
  private wakeNamespace(namespace: string | undefined): void {
    const prefix = `${namespace}/`;
    for (const [key, set] of this.waiters) if (key.startsWith(prefix)) set.forEach((w) => w());
  }

  private takesSlot(namespace: string, runName: string, label: string): boolean {
    return takesSlot(this.runs.get(runName, namespace) as RunLike | undefined, this.pods.list(namespace), label);
  }

  private released(namespace: string, runName: string): Promise<void> {
    const label = runLabelValue(runName);
    const key = `${namespace}/${label}`;
    if (!this.takesSlot(namespace, runName, label)) return Promise.resolve();
    return new Promise((resolve) => {
      const finish = (): void => {
        clearTimeout(timer);
        const set = this.waiters.get(key);
        set?.delete(check);
        if (set?.size === 0) this.waiters.delete(key);
        resolve();
      };
      const check = (): void => {
        if (!this.takesSlot(namespace, runName, label)) finish();
      };
      const timer = setTimeout(finish, this.releaseWaitMs);
      timer.unref();
      let set = this.waiters.get(key);
      if (!set) this.waiters.set(key, (set = new Set()));
      set.add(check);
    });
  }
}

/**
 * The API server's answer when a ResourceQuota refuses an object: HTTP 403 with a message like
 * `pods "x" is forbidden: exceeded quota: codemode-sandboxes, requested: pods=1, used: pods=20,
 * limited: pods=20`. Returns the part from "exceeded quota" on (it names the quota and the
 * numbers), or undefined for any other error.
 */
export function quotaExceeded(status: number | undefined, message: string): string | undefined {
  if (status !== 403) return undefined;
  const i = message.indexOf('exceeded quota');
  return i < 0 ? undefined : message.slice(i, i + 500);
}
