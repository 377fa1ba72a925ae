// What every fault test asserts once the mix has stopped: no code executed twice, every run
// terminal within its budget plus a stated grace, every failure with a reason a user can act on,
// and surviving sessions with their state (every answered call's id in place, none twice).
import { CoordinationV1Api, Watch, type V1Pod } from '@kubernetes/client-node';
import { REPLICA_LEASE_LABEL } from '../../../../src/controller/replica-liveness.js';
import { EXECUTOR_GONE_MESSAGE, VANISHED_MESSAGE } from '../../../../src/controller/run-decision.js';
import {
  ANNOTATION_EXECUTOR,
  AUDIT_EXECUTOR,
  GROUP,
  LABEL_MANAGED_BY,
  MANAGED_BY_VALUE,
  SANDBOXRUN_KIND,
  SANDBOXRUN_PLURAL,
  VERSION,
  isTerminalPhase,
  type SandboxRun,
} from '../../../../src/api/v1alpha1/index.js';
import { LABEL_POOL } from '../../../../src/sandbox/pod.js';
import type { TestKube } from '../../helpers/kube.js';
import { sessionRunIdOf, type Mix } from './mix.js';

/**
 * A run whose executor vanished is failed once start-up + timeout + 60 s have passed since its
 * creation (src/controller/run-decision.ts lostAfterMs), sooner when another replica finds the
 * executor gone (replica-liveness.ts); this grace on top covers the resync that notices it and a
 * busy 2-core node.
 */
export const GRACE_SECONDS = 60;

/** Every pod ever seen carrying each run (owner reference by uid), from a watch kept running. */
export class PodLedger {
  readonly podsByRun = new Map<string, Set<string>>();
  /** Runs carried by a warm-pool pod (the rest ran in cold pods or sessions). */
  readonly warm = new Set<string>();
  /** The runtime ConfigMaps (kernel versions) the pods of each run mounted, by run uid. */
  readonly runtimes = new Map<string, Set<string>>();
  private abort: { abort(): void } | undefined;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly k: TestKube,
    private readonly ns: string,
  ) {}

  async start(): Promise<void> {
    await this.relist();
    void this.watch();
    // A watch broken by a fault misses nothing that still exists: relist as a backstop.
    this.timer = setInterval(() => void this.relist().catch(() => undefined), 1000);
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
    this.abort?.abort();
  }

  /** Pods of the run with this uid; > 1 means its code was started a second time. */
  count(runUid: string): number {
    return this.podsByRun.get(runUid)?.size ?? 0;
  }

  private note(pod: V1Pod): void {
    for (const o of pod.metadata?.ownerReferences ?? []) {
      if (o.kind !== SANDBOXRUN_KIND || !pod.metadata?.uid) continue;
      const set = this.podsByRun.get(o.uid) ?? new Set<string>();
      set.add(pod.metadata.uid);
      if (pod.metadata.labels?.[LABEL_POOL] !== undefined) this.warm.add(o.uid);
      this.podsByRun.set(o.uid, set);
      const runtime = pod.spec?.volumes?.find((v) => v.name === 'runtime')?.configMap?.name;
      if (runtime !== undefined) this.runtimes.set(o.uid, (this.runtimes.get(o.uid) ?? new Set<string>()).add(runtime));
    }
  }

  private async relist(): Promise<void> {
    const list = await this.k.core.listNamespacedPod({ namespace: this.ns, labelSelector: `${LABEL_MANAGED_BY}=${MANAGED_BY_VALUE}` });
    for (const p of list.items) this.note(p);
  }

  private async watch(): Promise<void> {
    while (!this.stopped) {
      await new Promise<void>((resolve) => {
        new Watch(this.k.kc)
          .watch(
            `/api/v1/namespaces/${this.ns}/pods`,
            { labelSelector: `${LABEL_MANAGED_BY}=${MANAGED_BY_VALUE}` },
            (_type, obj: V1Pod) => this.note(obj),
            () => resolve(),
          )
          .then((req) => (this.abort = req))
          .catch(() => resolve());
      });
      if (!this.stopped) await new Promise((r) => setTimeout(r, 500));
    }
  }
}

const api = { group: GROUP, version: VERSION, plural: SANDBOXRUN_PLURAL };

export async function listRuns(k: TestKube, ns: string): Promise<SandboxRun[]> {
  return ((await k.custom.listNamespacedCustomObject({ ...api, namespace: ns })) as { items: SandboxRun[] }).items;
}

/** Waits until every run is terminal, bounded by its budget plus GRACE_SECONDS; lists late ones. */
export async function waitAllTerminal(k: TestKube, ns: string, startupSeconds: number): Promise<{ runs: SandboxRun[]; late: string[] }> {
  for (;;) {
    let runs: SandboxRun[];
    try {
      runs = await listRuns(k, ns);
    } catch {
      await new Promise((r) => setTimeout(r, 1000));
      continue;
    }
    const open = runs.filter((r) => !isTerminalPhase(r.status?.phase));
    // Stricter than lostAfterMs for runs in sessions, which also allows the packages timeout: the
    // mix's sessions install none, and every replica in these tests keeps a replica Lease (or
    // stops cleanly), so such a run's executor is found gone long before.
    const budget = (r: SandboxRun): number =>
      Date.parse(r.metadata.creationTimestamp ?? '') + (startupSeconds + r.spec.timeoutSeconds + 60 + GRACE_SECONDS) * 1000;
    const late = open.filter((r) => Date.now() > budget(r));
    if (open.length === 0 || late.length === open.length)
      return { runs, late: late.map((r) => `${r.metadata.name} ${JSON.stringify(r.status ?? {})}`.slice(0, 400)) };
    await new Promise((r) => setTimeout(r, 1000));
  }
}

export interface Summary {
  runs: number;
  /** SandboxRuns with spec.session the mix created through the API (kubectl's way). */
  sessionRuns: number;
  /** Transient runs carried by a warm-pool pod: shows the mix had warm and cold runs. */
  warm: number;
  succeeded: number;
  failedRuns: string[];
  calls: Record<CallOutcome, number>;
  sessionsSurviving: number;
  /** Calls answered with success whose run a killed replica had not recorded (see verdict). */
  answeredButUnrecorded: number;
  /** What failed calls were told, distinct, for the log. */
  errorSamples: string[];
}
type CallOutcome = 'ok' | 'error' | 'threw';

const tokenOf = (code: string | undefined): string | undefined => /print\("(t-[^"]+)", n \+ 1\)/.exec(code ?? '')?.[1];

/** A run a killed replica left unrecorded: failed by the next one as lost. */
function lostByKilled(run: SandboxRun | undefined, orphaned: ReadonlySet<string>): boolean {
  const lost = [VANISHED_MESSAGE, EXECUTOR_GONE_MESSAGE];
  return run !== undefined && orphaned.has(run.metadata.name ?? '') && run.status?.phase === 'Failed' && lost.includes(run.status.message ?? '');
}

/** The identities holding replica Leases in `ns` (src/controller/replica-liveness.ts), sorted. */
export async function replicaLeaseHolders(k: TestKube, ns: string): Promise<string[]> {
  const leases = await k.kc.makeApiClient(CoordinationV1Api).listNamespacedLease({ namespace: ns, labelSelector: `${REPLICA_LEASE_LABEL}=true` });
  return leases.items.map((l) => l.spec?.holderIdentity ?? '').sort();
}

/**
 * The runs a replica just killed left without an outcome: executed by it (its identity in the
 * executor annotation) and not terminal. Read right after the kill: the replica that later fails
 * such a run as lost claims it first, so the annotation no longer names the killed one then.
 */
export async function orphanedBy(k: TestKube, ns: string, killed: string): Promise<Set<string>> {
  const runs = await listRuns(k, ns);
  return new Set(
    runs.filter((r) => r.metadata.annotations?.[ANNOTATION_EXECUTOR] === killed && !isTerminalPhase(r.status?.phase)).map((r) => r.metadata.name ?? ''),
  );
}

/**
 * Every invariant, as a list of violations (empty = passed) and a summary for the test's log.
 * `orphaned`: runs a replica the test killed left without an outcome (orphanedBy). A replica
 * writes a run's final status right after its reply (off the caller's path); killed in between,
 * it leaves a caller with a success and the run to the next executor, which can only record that
 * the outcome was lost (run-decision.ts VANISHED_MESSAGE, or EXECUTOR_GONE_MESSAGE when its replica
 * Lease showed it gone first). Such a run is counted
 * (answeredButUnrecorded), not a violation; any other run answered success and not Succeeded is one.
 */
export async function verdict(
  k: TestKube,
  ns: string,
  mix: Mix,
  ledger: PodLedger,
  startupSeconds: number,
  orphaned: ReadonlySet<string> = new Set(),
): Promise<{ problems: string[]; summary: Summary }> {
  const problems: string[] = [];
  const { runs, late } = await waitAllTerminal(k, ns, startupSeconds);
  for (const l of late) problems.push(`non-terminal past its timeout + ${GRACE_SECONDS} s grace: ${l}`);
  const byToken = new Map<string, string[]>();
  for (const r of runs) {
    const token = tokenOf(r.spec.code);
    if (token) byToken.set(token, [...(byToken.get(token) ?? []), r.metadata.name ?? '']);
    const s = r.status;
    const counted = /^(t-\S+) (\d+)\n$/.exec(s?.stdout ?? '');
    if (counted && counted[2] !== '1') problems.push(`run ${r.metadata.name} executed ${counted[2]} times in its pod`);
    if (ledger.count(r.metadata.uid ?? '') > 1) problems.push(`run ${r.metadata.name} was carried by ${ledger.count(r.metadata.uid ?? '')} pods`);
    if (s?.phase === 'Succeeded' && token && s.stdout !== `${token} 1\n`)
      problems.push(`run ${r.metadata.name} succeeded with wrong output ${JSON.stringify(s.stdout)}`);
    // An audit record of session calls carries the reason, never the message (it may quote the
    // program's exception; src/audit/record.ts): the caller was told that.
    const audit = r.metadata.annotations?.[ANNOTATION_EXECUTOR] === AUDIT_EXECUTOR;
    if (isTerminalPhase(s?.phase) && s?.phase !== 'Succeeded' && (!s?.reason || (!audit && (s.message ?? '').length < 10)))
      problems.push(`run ${r.metadata.name} ended ${s?.phase} without a reason and message: ${JSON.stringify(s).slice(0, 600)}`);
  }
  for (const [token, names] of byToken) if (names.length > 1) problems.push(`call ${token} created ${names.length} runs: ${names.join(', ')}`);
  const byName = new Map(runs.map((r) => [r.metadata.name, r]));
  let answeredButUnrecorded = 0;
  for (const c of mix.records) {
    if (c.detail.startsWith('WRONG ANSWER')) problems.push(`call ${c.id}: ${c.detail}`);
    if (c.outcome === 'error' && !/^\w*: .{20,}/s.test(c.detail)) problems.push(`call ${c.id} failed without a reason a user can act on: ${c.detail}`);
    const recorded = c.run ? byName.get(c.run) : undefined;
    if (c.kind === 'transient' && c.outcome === 'ok' && c.run && recorded?.status?.phase !== 'Succeeded') {
      if (lostByKilled(recorded, orphaned)) answeredButUnrecorded++;
      else problems.push(`call ${c.id} answered success but run ${c.run} is ${recorded?.status?.phase}`);
    }
  }
  const lists = await mix.sessionLists();
  let surviving = 0;
  for (const [session, list] of lists) {
    if (!list) continue;
    surviving++;
    if (new Set(list).size !== list.length)
      problems.push(`session ${session} executed a call twice: ${list.filter((x, i) => list.indexOf(x) !== i).join(', ')}`);
    // A session run that succeeded ran exactly where its output says, whether or not the mix
    // followed it to its end.
    for (const r of runs.filter((x) => x.spec.session === session && x.status?.phase === 'Succeeded')) {
      const id = sessionRunIdOf(r.spec.code);
      if (id === undefined) continue;
      const position = Number(r.status?.stdout);
      if (!Number.isInteger(position) || list[position - 1] !== id)
        problems.push(`session ${session}: run ${r.metadata.name} (${id}) succeeded with ${JSON.stringify(r.status?.stdout)}, list has ${list[position - 1]}`);
    }
    // A caller told "its state is gone" would start over: that must be true.
    for (const c of mix.records.filter((r) => r.session === session && r.outcome === 'error' && /state is gone|was lost|is lost/.test(r.detail))) {
      problems.push(`session ${session} kept its state, but call ${c.id} was told: ${c.detail}`);
    }
    for (const c of mix.records.filter((r) => r.session === session && r.outcome === 'ok')) {
      if (list[(c.position ?? 0) - 1] !== c.id)
        problems.push(`session ${session} lost state: call ${c.id} answered position ${c.position}, list has ${list[(c.position ?? 0) - 1]}`);
    }
  }
  const calls = { ok: 0, error: 0, threw: 0 };
  for (const c of mix.records) calls[c.outcome]++;
  const failedRuns = runs
    .filter((r) => r.status?.phase !== 'Succeeded')
    .map((r) => `${r.metadata.name}: ${r.status?.phase} ${r.status?.reason}: ${(r.status?.message ?? '').slice(0, 160)}`);
  const errorSamples = [
    ...new Set(mix.records.filter((c) => c.outcome !== 'ok').map((c) => c.detail.replace(/\S*-[0-9a-z]{6,}\S*/g, '…').slice(0, 160))),
  ].slice(0, 8);
  return {
    problems,
    summary: {
      runs: runs.length,
      sessionRuns: runs.filter((r) => sessionRunIdOf(r.spec.code) !== undefined).length,
      warm: runs.filter((r) => ledger.warm.has(r.metadata.uid ?? '')).length,
      succeeded: runs.length - failedRuns.length,
      failedRuns,
      calls,
      sessionsSurviving: surviving,
      answeredButUnrecorded,
      errorSamples,
    },
  };
}
