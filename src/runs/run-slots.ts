// The Kubernetes side of run admission: what other replicas execute (counted from the SandboxRun
// informer cache every replica shares) and when a run's slot is really free (its sandbox pod is
// terminating or gone, as the API server's ResourceQuota counts pods), so a replica never has
// more of its run pods than its cap, even for the moment between one run's end and the next start.
import type { KubernetesObject, V1Pod } from '@kubernetes/client-node';
import { ANNOTATION_EXECUTOR, LABEL_RUN } from '../api/v1alpha1/labels.js';
import type { ResilientInformer } from '../controller/informer.js';
import { runLabelValue } from '../sandbox/names.js';
import { RunAdmission, type RunAdmissionDeps, type Ticket } from './admission.js';

const TERMINAL = new Set(['Succeeded', 'Failed', 'TimedOut']);
/** A slot is freed at the latest this long after its run ended, pod seen gone or not. */
const RELEASE_WAIT_MS = 15_000;

interface RunLike extends KubernetesObject {
  spec?: { session?: unknown };
  status?: { phase?: unknown };
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

/** Run slots of this replica: the admission queue plus release-when-the-pod-is-gone. */
export class RunSlots {
  readonly admission: RunAdmission;
  private readonly waiters = new Map<string, Set<() => void>>();

  constructor(
    private readonly runs: ResilientInformer<KubernetesObject>,
    private readonly pods: ResilientInformer<V1Pod>,
    identity: string,
    deps: Omit<RunAdmissionDeps, 'othersActive'>,
  ) {
    this.admission = new RunAdmission({ ...deps, othersActive: () => countOthersActive(this.runs.list(deps.namespace), identity) });
    // Another replica's run ending frees namespace capacity: let waiting calls re-check.
    runs.onChange(() => this.admission.poke());
    pods.onChange((pod) => {
      const run = pod.metadata?.labels?.[LABEL_RUN];
      if (run !== undefined) this.waiters.get(`${pod.metadata?.namespace}/${run}`)?.forEach((w) => w());
    });
  }

  /** Frees `ticket` once `done` settled and the run's pod no longer holds capacity. */
  releaseAfter(ticket: Ticket, done: Promise<unknown>, namespace: string, runName: string): void {
    void done
      .catch(() => undefined)
      .then(() => this.podReleased(namespace, runName))
      .finally(() => ticket.release());
  }

  private runPodHoldsCapacity(label: string, namespace: string): boolean {
    return this.pods.list(namespace).some((p) => p.metadata?.labels?.[LABEL_RUN] === label && holdsCapacity(p));
  }

  private podReleased(namespace: string, runName: string): Promise<void> {
    const label = runLabelValue(runName);
    const key = `${namespace}/${label}`;
    if (!this.runPodHoldsCapacity(label, namespace)) return Promise.resolve();
    return new Promise((resolve) => {
      const finish = (): void => {
        clearTimeout(timer);
        const set = this.waiters.get(key);
        set?.delete(check);
        if (set?.size === 0) this.waiters.delete(key);
        resolve();
      };
      const check = (): void => {
        if (!this.runPodHoldsCapacity(label, namespace)) finish();
      };
      const timer = setTimeout(finish, RELEASE_WAIT_MS);
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
