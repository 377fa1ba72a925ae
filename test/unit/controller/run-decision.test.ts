import { describe, expect, it } from 'vitest';
import type { SandboxRun } from '../../../src/api/v1alpha1/index.js';
import { ANNOTATION_RECALL_PROOF, AUDIT_EXECUTOR, recallBelieved, recallProofOf } from '../../../src/api/v1alpha1/labels.js';
import type { V1Pod } from '@kubernetes/client-node';
import {
  AUDIT_INCOMPLETE_MESSAGE,
  EXECUTOR_GONE_MESSAGE,
  NOT_STARTED_MESSAGE,
  RAN_HERE_MESSAGE,
  VANISHED_MESSAGE,
  budgetStart,
  decideRun,
  lostAfterMs,
  podsThatMayCarry,
  type RunFacts,
} from '../../../src/controller/run-decision.js';

const run = (phase?: string): SandboxRun =>
  ({
    apiVersion: 'codemode.dev/v1alpha1',
    kind: 'SandboxRun',
    metadata: { name: 'r', namespace: 'n', uid: 'u' },
    spec: { language: 'python', code: '1', timeoutSeconds: 30 },
    ...(phase && { status: { phase } }),
  }) as SandboxRun;
const facts = (f: Partial<RunFacts>): RunFacts => ({
  identity: 'me',
  executor: 'me',
  busyHere: false,
  creatingHere: false,
  started: false,
  ttlRemainingMs: undefined,
  lostAfterMs: 60_000,
  ...f,
});

describe('decideRun (exactly-once from the API, not from memory)', () => {
  it.each([
    ['terminal, TTL left', 'Succeeded', {}, { kind: 'wait', afterMs: 1000 }, { ttlRemainingMs: 1000 }],
    ['terminal, TTL over', 'Failed', {}, { kind: 'delete' }, { ttlRemainingMs: -1 }],
    ['executing here', undefined, { busyHere: true, started: true }, { kind: 'wait' }, {}],
    // Its watch event came before the create's answer: the creator executes it, not a read-back here.
    ['being created here, never started', undefined, { creatingHere: true }, { kind: 'wait', afterMs: 1000 }, {}],
    ['being created here, then executing here', undefined, { creatingHere: true, busyHere: true }, { kind: 'wait' }, {}],
    ['being created here, terminal', 'Succeeded', { creatingHere: true }, { kind: 'wait', afterMs: 1000 }, { ttlRemainingMs: 1000 }],
    ['unclaimed', undefined, { executor: undefined }, { kind: 'claim' }, {}],
    ['unclaimed, but a pod carries it', undefined, { executor: undefined, started: true }, { kind: 'fail' }, {}],
    ['ours, never started', undefined, {}, { kind: 'execute' }, {}],
    ['ours, Pending, never started', 'Pending', {}, { kind: 'execute' }, {}],
    // A finished run's status cleared by hand (this process forgot it once it finished): not again.
    ['ours, never started, budget over', undefined, { lostAfterMs: 0 }, { kind: 'fail', message: NOT_STARTED_MESSAGE }, {}],
    ['ours, no marker, but run here already (status cleared)', undefined, { ranHere: true }, { kind: 'fail', message: RAN_HERE_MESSAGE }, {}],
    ['ours, run here already and executing', 'Running', { ranHere: true, busyHere: true, started: true }, { kind: 'wait' }, {}],
    // The case a 10-minute memory used to cover: ours, started, no longer in memory → never again.
    ['ours, started, not in memory, budget left', undefined, { started: true }, { kind: 'wait', afterMs: 5000 }, {}],
    ['ours, started, not in memory, budget over', 'Running', { started: true, lostAfterMs: 0 }, { kind: 'fail' }, {}],
    ["another replica's, budget left", 'Running', { executor: 'other', started: true }, { kind: 'wait', afterMs: 60_000 }, {}],
    ["another replica's, never started, budget over", undefined, { executor: 'other', lostAfterMs: -5 }, { kind: 'fail' }, {}],
    ["another replica's, started, budget over", 'Running', { executor: 'other', started: true, lostAfterMs: -5 }, { kind: 'fail' }, {}],
    // Replica liveness (replica-liveness.ts): a gone executor's run fails at once, whatever the budget.
    [
      "another replica's, started, executor gone",
      'Running',
      { executor: 'other', started: true, executorGone: true },
      { kind: 'fail', message: EXECUTOR_GONE_MESSAGE },
      {},
    ],
    ["another replica's, claimed, executor gone", undefined, { executor: 'other', executorGone: true }, { kind: 'fail', message: EXECUTOR_GONE_MESSAGE }, {}],
    [
      "another replica's, budget over, executor gone",
      'Running',
      { executor: 'other', started: true, lostAfterMs: -5, executorGone: true },
      { kind: 'fail', message: EXECUTOR_GONE_MESSAGE },
      {},
    ],
    ["another replica's, executor alive", 'Running', { executor: 'other', started: true, executorGone: false }, { kind: 'wait', afterMs: 60_000 }, {}],
    // This process is alive whatever a caller claims about it.
    ['ours, never started, "gone"', undefined, { executorGone: true }, { kind: 'execute' }, {}],
    ['ours, executing here, "gone"', 'Running', { started: true, busyHere: true, executorGone: true }, { kind: 'wait' }, {}],
    ['unclaimed, "gone"', undefined, { executor: undefined, executorGone: true }, { kind: 'claim' }, {}],
    ['terminal, executor gone', 'Succeeded', { executor: 'other', executorGone: true }, { kind: 'wait', afterMs: 1000 }, { ttlRemainingMs: 1000 }],
  ])('%s', (_n, phase, f, expected, extra) => {
    expect(decideRun(run(phase), facts({ ...f, ...extra }))).toMatchObject(expected);
  });

  // A claim taken to fail a run (its executor gone) whose answer was lost, or whose status write was
  // refused or cleared: the claim (ANNOTATION_RECOVERING_FROM) says so, and the run, now "ours and
  // never started", is failed again, never executed — its code may have started in the first
  // executor's reserved pod, which carries no marker yet.
  it.each([
    ['ours, claimed to fail it, never started', undefined, { recoveringFrom: 'other' }, { kind: 'fail', message: EXECUTOR_GONE_MESSAGE }],
    ['ours, claimed to fail it from no executor', undefined, { recoveringFrom: '' }, { kind: 'fail', message: VANISHED_MESSAGE }],
    ['ours, claimed to fail it, with a marker', 'Running', { recoveringFrom: 'other', started: true }, { kind: 'fail', message: EXECUTOR_GONE_MESSAGE }],
    ['ours, claimed to fail it, recovering here now', undefined, { recoveringFrom: 'other', busyHere: true }, { kind: 'wait' }],
    ["another replica's recovery, alive", undefined, { executor: 'third', recoveringFrom: 'other' }, { kind: 'wait', afterMs: 60_000 }],
    [
      "another replica's recovery, gone too",
      undefined,
      { executor: 'third', recoveringFrom: 'other', executorGone: true },
      { kind: 'fail', message: EXECUTOR_GONE_MESSAGE },
    ],
  ])('a run claimed to be failed: %s', (_n, phase, f, expected) => {
    expect(decideRun(run(phase), facts(f))).toMatchObject(expected);
  });

  it('never decides to execute a run claimed to be failed, whatever else it looks like', () => {
    for (const recoveringFrom of ['', 'other']) {
      for (const executor of ['me', 'other', undefined]) {
        for (const started of [false, true]) {
          for (const lostAfterMs of [-1, 0, 1, 60_000]) {
            for (const executorGone of [false, true]) {
              const d = decideRun(run(undefined), facts({ recoveringFrom, executor, started, lostAfterMs, executorGone }));
              // Unclaimed (the executor annotation removed by hand) is claimed as any such run is.
              if (executor !== undefined) expect(d.kind, JSON.stringify({ recoveringFrom, executor, started, lostAfterMs, executorGone })).not.toBe('execute');
            }
          }
        }
      }
    }
  });

  it('never decides to execute a run that has a marker, whoever holds it and whatever the time', () => {
    for (const executor of ['me', 'other', undefined]) {
      for (const lostAfterMs of [-1, 0, 1, 60_000]) {
        for (const busyHere of [false, true]) {
          for (const creatingHere of [false, true]) {
            for (const executorGone of [false, true]) {
              const d = decideRun(run('Running'), facts({ executor, lostAfterMs, busyHere, creatingHere, started: true, executorGone }));
              expect(['execute', 'claim']).not.toContain(d.kind);
            }
          }
        }
      }
    }
  });

  // Audit records (src/audit) record session calls that already ran: executing one would run the
  // call a second time, so no fact may lead there.
  it.each([
    ['terminal, TTL left', 'Succeeded', {}, { kind: 'wait', afterMs: 1000 }, { ttlRemainingMs: 1000 }],
    ['terminal, TTL over', 'TimedOut', {}, { kind: 'delete' }, { ttlRemainingMs: -1 }],
    ['status not written yet', undefined, {}, { kind: 'wait', afterMs: 60_000 }, {}],
    ['status never written, budget over', undefined, { lostAfterMs: 0 }, { kind: 'fail', message: AUDIT_INCOMPLETE_MESSAGE }, {}],
  ])('audit record: %s', (_n, phase, f, expected, extra) => {
    expect(decideRun(run(phase), facts({ executor: AUDIT_EXECUTOR, auditRecord: true, ...f, ...extra }))).toMatchObject(expected);
  });

  it('never executes or claims an audit record, whatever the other facts say', () => {
    for (const phase of [undefined, 'Pending', 'Running']) {
      for (const executor of ['me', AUDIT_EXECUTOR, undefined]) {
        for (const started of [false, true]) {
          for (const lostAfterMs of [-1, 0, 60_000]) {
            for (const busyHere of [false, true]) {
              const d = decideRun(run(phase), facts({ identity: 'me', executor, started, lostAfterMs, busyHere, auditRecord: true }));
              expect(['execute', 'claim']).not.toContain(d.kind);
            }
          }
        }
      }
    }
  });
});

/** A pod named `name`, owned by the run `owner` (uid) and/or reserved by `reservedBy`, maybe being deleted. */
const pod = (name: string, o: { owner?: string; reservedBy?: string; reservedByLabel?: string; deleting?: boolean } = {}): V1Pod => ({
  metadata: {
    name,
    ...(o.owner && { ownerReferences: [{ apiVersion: 'codemode.dev/v1alpha1', kind: 'SandboxRun', name: 'r', uid: o.owner }] }),
    ...(o.reservedBy && { labels: { 'codemode.dev/pool': 'warm' }, annotations: { 'codemode.dev/reserved-by': o.reservedBy } }),
    ...(o.reservedByLabel && { labels: { 'codemode.dev/pool': 'reserved', 'codemode.dev/reserved-by': o.reservedByLabel } }),
    ...(o.deleting && { deletionTimestamp: new Date() }),
  },
});

describe('podsThatMayCarry (whose kernels a recovery asks)', () => {
  it.each([
    ['its own pod, not the reservations', [pod('own', { owner: 'u' }), pod('res', { reservedBy: 'h' })], ['own']],
    ['its pool pod, already adopted and still marked reserved', [pod('p', { owner: 'u', reservedBy: 'h' }), pod('res', { reservedBy: 'h' })], ['p']],
    [
      'without an own pod: every pod its executor reserved',
      [pod('a', { reservedBy: 'h' }), pod('b', { reservedBy: 'h' }), pod('c', { reservedBy: 'x' })],
      ['a', 'b'],
    ],
    // Releases up to 0922e5e reserved by relabelling; their runs are recovered by releases up to 4c75285.
    ['a reservation written as a label is not this release’s', [pod('a', { reservedByLabel: 'h' }), pod('b', { reservedBy: 'h' })], ['b']],
    ['another run’s pod is never asked', [pod('other', { owner: 'v' })], []],
    ['a pod being deleted cannot be asked', [pod('own', { owner: 'u', deleting: true }), pod('res', { reservedBy: 'h' })], ['res']],
    ['nothing at all', [], []],
  ])('%s', (_name, pods, names) => {
    expect(podsThatMayCarry(pods, 'u', 'h')).toEqual(names);
  });

  it('asks no reserved pod when the executor is unknown', () => {
    expect(podsThatMayCarry([pod('res', { reservedBy: 'h' })], 'u', undefined)).toEqual([]);
  });
});

describe('a run\u2019s time budget starts at its creation, or at its claim when later (budgetStart, lostAfterMs)', () => {
  const created = '2026-12-04T10:00:00Z';
  const now = new Date('2026-12-04T10:30:00Z');
  const meta = (claimedAt?: string) => ({
    creationTimestamp: created,
    ...(claimedAt !== undefined && { annotations: { 'codemode.dev/claimed-at': claimedAt } }),
  });
  it.each<[string, string | undefined, string]>([
    ['no claim time: the creation', undefined, created],
    ['claimed after waiting Queued: the claim', '2026-12-04T10:25:00Z', '2026-12-04T10:25:00Z'],
    ['a claim time before the creation: the creation', '2026-12-04T09:00:00Z', created],
    ['not a time: the creation', 'soon', created],
    ['ahead of this clock within the skew: the claim', '2026-12-04T10:30:30Z', '2026-12-04T10:30:30Z'],
    ['far ahead (set by hand): the creation', '2099-01-01T00:00:00Z', created],
  ])('%s', (_name, claimedAt, start) => {
    expect(budgetStart(meta(claimedAt), now)).toBe(Date.parse(start));
  });

  it('gives a run claimed now after a long queue its whole budget', () => {
    const run = { metadata: meta('2026-12-04T10:30:00Z'), spec: { timeoutSeconds: 30 } };
    const queuedOnly = { metadata: meta(), spec: { timeoutSeconds: 30 } };
    expect(lostAfterMs(queuedOnly, 60, now)).toBeLessThan(0);
    expect(lostAfterMs(run, 60, now)).toBeGreaterThan(60_000);
  });
});

// A recovery may ask pool pods that carry another run (podsThatMayCarry's reservations), whose code
// could answer for this one: an answer is believed only with the run's recall proof, and a run
// without one is asked only of pods it owns (RunController.markerPods).
describe('recall answers believed for a run', () => {
  const withProof = (proof?: string): Pick<SandboxRun, 'metadata'> => ({
    metadata: { name: 'r', ...(proof !== undefined && { annotations: { [ANNOTATION_RECALL_PROOF]: proof } }) },
  });
  const PROOF = '0123456789abcdef0123456789abcdef';

  it.each<[string, string | undefined, string | undefined, boolean]>([
    ["the run's own proof", PROOF, PROOF, true],
    ['no proof in the answer (another pod, or a forger)', PROOF, undefined, false],
    ['another proof', PROOF, 'f'.repeat(32), false],
    ['a run without a proof (asked only of its own pods): any answer', undefined, undefined, true],
    ['a proof the gateway never makes counts as none', 'not-hex', undefined, true],
  ])('%s', (_name, runProof, answerProof, believed) => {
    expect(recallBelieved(withProof(runProof), answerProof)).toBe(believed);
  });

  it.each<[string | undefined, string | undefined]>([
    [PROOF, PROOF],
    [undefined, undefined],
    ['ABCDEF0123456789ABCDEF0123456789', undefined],
    [`${PROOF}0`, undefined],
  ])('recallProofOf(%j) is %j', (proof, want) => {
    expect(recallProofOf(withProof(proof))).toBe(want);
  });
});
