// How many audit records live in the namespace, in all and by user, and whether a user may have
// another. Records are SandboxRuns and count against the namespace's SandboxRun quota
// (count/sandboxruns) with every run: one user's busy sessions wrote a record a second each, kept
// for the audit TTL (10 minutes), and filled the chart's 2,000 in a few minutes; every user's
// execute_code was then refused by the quota until the records expired. At a cap (all records,
// CODEMODE_AUDIT_MAX_RECORDS; one user's, CODEMODE_AUDIT_MAX_RECORDS_PER_USER) a user's calls wait
// in the writer's queue, gathering into one record (up to MAX_AUDIT_CALLS), until one expires.
// Counted from the SandboxRun cache every replica shares: soft by the records other replicas are
// writing in the same moment. Pure.
import type { KubernetesObject } from '@kubernetes/client-node';
import { ANNOTATION_EXECUTOR, AUDIT_EXECUTOR } from '../api/v1alpha1/labels.js';

/** Audit records not being deleted: how many, and how many by spec.owner.user ('' for none). */
export interface LiveRecords {
  total: number;
  byUser: Map<string, number>;
}

/** The caps on live audit records. */
export interface RecordCaps {
  total: number;
  perUser: number;
}

type Obj = KubernetesObject & { spec?: { owner?: { user?: unknown } } };

/**
 * The audit records among `runs`, counted by the user their spec names (the value the admission
 * policy guards; the owner label is the user's to change).
 */
export function liveRecords(runs: readonly KubernetesObject[]): LiveRecords {
  const byUser = new Map<string, number>();
  let total = 0;
  for (const o of runs as readonly Obj[]) {
    if (o.metadata?.annotations?.[ANNOTATION_EXECUTOR] !== AUDIT_EXECUTOR || o.metadata.deletionTimestamp) continue;
    const user = typeof o.spec?.owner?.user === 'string' ? o.spec.owner.user : '';
    byUser.set(user, (byUser.get(user) ?? 0) + 1);
    total++;
  }
  return { total, byUser };
}

/** Whether `user` may not have another record now: all records, or theirs, are at a cap. */
export function atRecordCap(live: LiveRecords, caps: RecordCaps, user: string): boolean {
  return live.total >= caps.total || (live.byUser.get(user) ?? 0) >= caps.perUser;
}
