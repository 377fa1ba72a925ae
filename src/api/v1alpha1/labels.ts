// Label keys the operator puts on the objects it creates. Selectors (the NetworkPolicy, the
// controller's pod informer) depend on these exact strings, so they live in one place.

/** Standard recommended label: who manages the object. */
export const LABEL_MANAGED_BY = 'app.kubernetes.io/managed-by';
export const MANAGED_BY_VALUE = 'codemode-operator';

/**
 * Set to `'true'` on every sandbox pod. The namespace's deny-all NetworkPolicy selects pods by
 * this label, so a pod without it would run unprotected: only the pod builder may set it.
 */
export const LABEL_SANDBOX = 'codemode.dev/sandbox';
export const SANDBOX_LABEL_VALUE = 'true';

/**
 * Name of the SandboxRun a pod belongs to. Label values are limited to 63 characters, so the
 * value comes from `runLabelValue(runName)` in src/sandbox/names.ts (the name itself when short).
 */
export const LABEL_RUN = 'codemode.dev/run';

/** The runtime (python, bash, sh, node) the pod runs; handy for `kubectl get pods -l`. */
export const LABEL_RUNTIME = 'codemode.dev/runtime';

/**
 * Identity of the process that executes a SandboxRun. The gateway sets it on the runs it creates
 * (so it can stream their output); a run created without it is claimed by the first replica that
 * sets it with an optimistic-concurrency patch.
 */
export const ANNOTATION_EXECUTOR = 'codemode.dev/executor';

/**
 * When a replica claimed a run it did not create (RFC 3339), written with ANNOTATION_EXECUTOR by
 * the claim: the run's time budget (src/controller/run-decision.ts, lostAfterMs) starts there, not
 * at its creation, so a run that waited Queued longer than its budget is not failed as lost by
 * another replica while its claimer executes it.
 */
export const ANNOTATION_CLAIMED_AT = 'codemode.dev/claimed-at';

/**
 * Written with ANNOTATION_EXECUTOR by a claim made to fail a run (its executor gone, or the run
 * vanished with a marker), never by a claim to execute: the executor it was taken from ('' for
 * none). The claim is what a lost answer, a refused status write or a status cleared by hand
 * leaves behind, and a run claimed this way is only ever failed again (with the reserved pods of
 * that first executor asked for its outcome), never executed: "executor is me, no marker" alone
 * would have started its code a second time.
 */
export const ANNOTATION_RECOVERING_FROM = 'codemode.dev/recovering-from';

/**
 * A secret the gateway writes on a run it creates and sends with the run's code; the kernel keeps
 * it with the result and shows it only in answers to a recall. A replica recovering the outcome of
 * a run whose executor stopped asks the pool pods that executor had reserved (a warm run's code
 * starts in one before the pod is the run's), and another run's code in one of them could answer
 * for this run: an answer is believed only with this run's secret, which no other pod was sent.
 * Runs without it (created with kubectl: claimed, never started early) are recovered only from the
 * pods they own (src/controller/run-decision.ts, podsThatMayCarry).
 */
export const ANNOTATION_RECALL_PROOF = 'codemode.dev/recall-proof';

/** The recall proof of `run` (ANNOTATION_RECALL_PROOF), when it is a proof the gateway could have made. */
export function recallProofOf(run: { metadata: { annotations?: Record<string, string> | undefined } }): string | undefined {
  const p = run.metadata.annotations?.[ANNOTATION_RECALL_PROOF];
  return p !== undefined && /^[0-9a-f]{32}$/.test(p) ? p : undefined;
}

/**
 * Whether a recall answer carrying `answerProof` is the kernel's that was sent `run`: with the run's
 * proof when it has one. One without is asked only of pods it owns (podsThatMayCarry).
 */
export function recallBelieved(run: { metadata: { annotations?: Record<string, string> | undefined } }, answerProof: string | undefined): boolean {
  const proof = recallProofOf(run);
  return proof === undefined || answerProof === proof;
}

/**
 * The executor value of an audit record: a SandboxRun that records a call already made in a
 * session (src/audit). No replica identity looks like it (identities have no '/'), so no replica —
 * not even one from before audit records existed — executes or claims it: it is history, not work.
 */
export const AUDIT_EXECUTOR = 'codemode.dev/audit-record';

/** The SandboxProfile a sandbox pod was built from (absent on pods of older versions: the built-in profile). */
export const LABEL_PROFILE = 'codemode.dev/profile';

/** Name of the SandboxSession a pod belongs to (shortened like LABEL_RUN when too long). */
export const LABEL_SESSION = 'codemode.dev/session';

/** On the Deployment, pods, Service and NetworkPolicy of a stdio UpstreamServer: its name (≤ 63 chars by construction). */
export const LABEL_UPSTREAM_SERVER = 'codemode.dev/upstream-server';

/**
 * On package fetcher pods (src/packages): the session they fetch for. They are not sandboxes (no
 * LABEL_SANDBOX): their own NetworkPolicy lets them reach the package index and nothing else.
 */
export const LABEL_PACKAGE_FETCHER = 'codemode.dev/package-fetcher';

/**
 * A pool pod's reservation by one gateway process (src/controller/pool-reservation.ts): a hash of
 * its identity, on a pod still labelled `codemode.dev/pool=warm`. An annotation, not a label: a
 * label change makes the node's NetworkPolicy controller (kube-router, for one) resync its rules;
 * an annotation change does not. Releases up to 0922e5e reserved by relabelling the pod
 * `pool=reserved` (with a label of this name) and took a pod reserved by annotation for an
 * unreserved one; 3afc427–d627f6e read both forms and 4c75285 wrote only this one, so a release
 * reading only the annotation is reached through those (README, *Upgrade*). A pod still labelled
 * `pool=reserved` is not `warm`: it is never claimed, and its deadline ends it.
 */
export const ANNOTATION_RESERVED_BY = 'codemode.dev/reserved-by';
