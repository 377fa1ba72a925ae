import { describe, expect, it } from 'vitest';
import type { KubernetesObject, V1Pod } from '@kubernetes/client-node';
import { GATEWAY_FIELD_MANAGER, MAX_MESSAGE_LENGTH, SandboxSessionStatusSchema, type SandboxSession } from '../../../src/api/v1alpha1/index.js';
import { activityStoredAt, keepActivityStamp, sessionExpiry } from '../../../src/controller/session-gc.js';
import {
  KILLED_INTERPRETER_MESSAGE,
  computeSessionStatus,
  controllerOwned,
  failedStatus,
  refusedStatus,
  sessionStatusChanged,
} from '../../../src/controller/session-status.js';

const now = new Date('2026-11-22T12:00:00.000Z');

function session(status?: SandboxSession['status'], spec: Partial<SandboxSession['spec']> = {}, created = '2026-11-22T11:50:00.000Z'): SandboxSession {
  return {
    apiVersion: 'codemode.dev/v1alpha1',
    kind: 'SandboxSession',
    metadata: { name: 's', namespace: 'ns', uid: 'u', generation: 1, creationTimestamp: created },
    spec: { language: 'python', idleTimeoutSeconds: 600, ...spec },
    status,
  };
}

describe('sessionExpiry (idle GC time math)', () => {
  it.each([
    ['never used: idle from creation', undefined, {}, 86400, '2026-11-22T12:00:00.000Z', 'idle', 0],
    ['used 1 minute ago', { lastActivityTime: '2026-11-22T11:59:00.000Z' }, {}, 86400, '2026-11-22T12:09:00.000Z', 'idle', 540_000],
    [
      'short idle timeout, long ago',
      { lastActivityTime: '2026-11-22T11:55:00.000Z' },
      { idleTimeoutSeconds: 60 },
      86400,
      '2026-11-22T11:56:00.000Z',
      'idle',
      -240_000,
    ],
    [
      'lifetime comes first',
      { lastActivityTime: '2026-11-22T11:59:59.000Z' },
      { maxLifetimeSeconds: 900 },
      86400,
      '2026-11-22T12:05:00.000Z',
      'lifetime',
      300_000,
    ],
    ['admin lifetime as default', { lastActivityTime: '2026-11-22T11:59:59.000Z' }, {}, 700, '2026-11-22T12:01:40.000Z', 'lifetime', 100_000],
  ])('%s', (_n, status, spec, defaultLifetime, expiresAt, cause, remaining) => {
    const e = sessionExpiry(session({ phase: 'Ready', ...status }, spec), defaultLifetime, now);
    expect(e).toEqual({ expiresAt: new Date(expiresAt), cause, remainingMs: remaining });
  });

  // Created 11:50, idle timeout 60 s unless said, lifetime 86400 s (expires 2026-11-23T11:50).
  const ready = (status: 'True' | 'False', at: string): NonNullable<SandboxSession['status']>['conditions'] => [
    { type: 'Ready', status, reason: status === 'True' ? 'KernelReady' : 'PodPending', message: '', lastTransitionTime: at },
  ];
  it.each<[string, SandboxSession['status'], string, 'idle' | 'lifetime']>([
    ['starting, no phase yet: only its lifetime counts', undefined, '2026-11-23T11:50:00.000Z', 'lifetime'],
    [
      'Pending (installing packages) ten minutes: not idle',
      { phase: 'Pending', conditions: ready('False', '2026-11-22T11:50:00Z') },
      '2026-11-23T11:50:00.000Z',
      'lifetime',
    ],
    [
      'Ready at 11:59:30 after a long start: idle from then',
      { phase: 'Ready', conditions: ready('True', '2026-11-22T11:59:30Z') },
      '2026-11-22T12:00:30.000Z',
      'idle',
    ],
    [
      'used after it became Ready: idle from the use',
      { phase: 'Ready', lastActivityTime: '2026-11-22T11:59:45.000Z', conditions: ready('True', '2026-11-22T11:59:30Z') },
      '2026-11-22T12:00:45.000Z',
      'idle',
    ],
    ['Lost at 11:59:40: idle from the loss', { phase: 'Lost', conditions: ready('False', '2026-11-22T11:59:40Z') }, '2026-11-22T12:00:40.000Z', 'idle'],
    ['Ready without a condition: idle from creation', { phase: 'Ready' }, '2026-11-22T11:51:00.000Z', 'idle'],
    ['a Ready time in the future counts as now', { phase: 'Ready', conditions: ready('True', '2027-01-01T00:00:00Z') }, '2026-11-22T12:01:00.000Z', 'idle'],
  ])('%s', (_n, status, expiresAt, cause) => {
    const e = sessionExpiry(session(status, { idleTimeoutSeconds: 60 }), 86400, now);
    expect(e).toEqual({ expiresAt: new Date(expiresAt), cause, remainingMs: Date.parse(expiresAt) - now.getTime() });
  });

  const stamp = (time: string, manager = GATEWAY_FIELD_MANAGER, subresource = 'status'): unknown => ({ manager, operation: 'Apply', subresource, time });
  it.each<[string, string, unknown[], string]>([
    // The writing replica's clock 5 minutes behind: the API server stored the write 12:00:00.
    ['gateway clock behind: the stored time counts (less a second)', '2026-11-22T11:55:00.000Z', [stamp('2026-11-22T12:00:00Z')], '2026-11-22T12:09:59.000Z'],
    ['clocks agree: lastActivityTime counts', '2026-11-22T11:59:59.400Z', [stamp('2026-11-22T12:00:00Z')], '2026-11-22T12:09:59.400Z'],
    ['gateway clock ahead: lastActivityTime counts', '2026-11-22T11:59:30.000Z', [stamp('2026-11-22T11:59:00Z')], '2026-11-22T12:09:30.000Z'],
    ['a stored time in the future counts as now', '2026-11-22T11:50:00.000Z', [stamp('2027-01-01T00:00:00Z')], '2026-11-22T12:10:00.000Z'],
    ["another manager's entry is not activity", '2026-11-22T11:55:00.000Z', [stamp('2026-11-22T12:00:00Z', 'kubectl-edit')], '2026-11-22T12:05:00.000Z'],
    [
      'an entry of the main resource is not activity',
      '2026-11-22T11:55:00.000Z',
      [stamp('2026-11-22T12:00:00Z', GATEWAY_FIELD_MANAGER, '')],
      '2026-11-22T12:05:00.000Z',
    ],
    ['an unreadable time is ignored', '2026-11-22T11:55:00.000Z', [stamp('soon'), { manager: 7 }, null], '2026-11-22T12:05:00.000Z'],
  ])('%s', (_n, lastActivityTime, managedFields, expiresAt) => {
    const s = session({ phase: 'Ready', lastActivityTime }, {}, '2026-11-22T11:40:00.000Z');
    const e = sessionExpiry({ ...s, metadata: { ...s.metadata, managedFields } }, 86400, now);
    expect(e.expiresAt).toEqual(new Date(expiresAt));
  });

  it('the informer keeps only the stamp it reads: the gateway status entry, without its field set', () => {
    const obj: KubernetesObject = {
      metadata: {
        name: 's',
        managedFields: [
          { manager: 'kubectl', operation: 'Update', time: new Date('2026-11-22T11:00:00Z'), fieldsType: 'FieldsV1', fieldsV1: { 'f:spec': {} } },
          {
            manager: GATEWAY_FIELD_MANAGER,
            operation: 'Apply',
            subresource: 'status',
            time: new Date('2026-11-22T12:00:00Z'),
            fieldsType: 'FieldsV1',
            fieldsV1: { 'f:status': {} },
          },
        ],
      },
    };
    const kept = keepActivityStamp(obj);
    expect(kept.metadata?.managedFields).toEqual([
      { manager: GATEWAY_FIELD_MANAGER, operation: 'Apply', subresource: 'status', time: new Date('2026-11-22T12:00:00Z') },
    ]);
    expect(activityStoredAt(kept as unknown as { metadata: Record<string, unknown> })).toBe(Date.parse('2026-11-22T12:00:00Z'));
    expect(keepActivityStamp({ metadata: { name: 's', managedFields: [obj.metadata?.managedFields?.[0] ?? {}] } }).metadata).toEqual({ name: 's' });
  });
});

const readyPod: V1Pod = { metadata: { name: 'p' }, status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] } };
const pendingPod: V1Pod = { metadata: { name: 'p' }, status: { phase: 'Pending' } };
const failedPod: V1Pod = { metadata: { name: 'p' }, status: { phase: 'Failed', reason: 'Evicted', message: 'evicted' } };
const exp = new Date('2026-11-22T12:10:00.000Z');
/** A pod whose container just terminated: still Running, no longer Ready (a moment before Failed). */
const stoppingPod: V1Pod = {
  metadata: { name: 'p' },
  status: {
    phase: 'Running',
    conditions: [{ type: 'Ready', status: 'False' }],
    containerStatuses: [{ name: 'sandbox', image: 'i', imageID: '', ready: false, restartCount: 0, state: { terminated: { exitCode: 137 } } }],
  },
};
const failedAfterStop: V1Pod = { ...stoppingPod, status: { ...stoppingPod.status, phase: 'Failed' } };

describe('computeSessionStatus', () => {
  it.each([
    ['no pod yet', undefined, undefined, false, 'Pending'],
    ['pod starting', undefined, pendingPod, false, 'Pending'],
    ['pod ready', undefined, readyPod, false, 'Ready'],
    ['pod gone after ready', { phase: 'Ready' as const }, undefined, false, 'Lost'],
    ['pod failed after ready', { phase: 'Ready' as const }, failedPod, false, 'Lost'],
    // Its container stopped, the kubelet has not said Failed yet: not back to starting.
    ['pod no longer ready after ready', { phase: 'Ready' as const }, stoppingPod, false, 'Ready'],
    ['pod no longer ready after ready, past the start-up time', { phase: 'Ready' as const }, stoppingPod, true, 'Ready'],
    ['pod stopped after ready', { phase: 'Ready' as const }, failedAfterStop, false, 'Lost'],
    ['pod failed before ready', undefined, failedPod, false, 'Failed'],
    ['start-up took too long', undefined, pendingPod, true, 'Failed'],
    ['lost stays lost', { phase: 'Lost' as const }, readyPod, false, 'Lost'],
    [
      'the gateway reported the interpreter dead',
      { phase: 'Ready' as const, kernelLost: { message: 'the exec stream closed', time: '2026-11-22T11:59:00Z' } },
      readyPod,
      false,
      'Lost',
    ],
  ])('%s → %s', (_n, status, pod, startupExpired, phase) => {
    const s = computeSessionStatus(session(status), pod, 'p', exp, startupExpired, now);
    expect(s.phase).toBe(phase);
    expect(s.expiresAt).toBe(exp.toISOString());
    expect(s.podName).toBe('p');
  });

  // A Ready session whose interpreter was SIGKILLed (137) with no call to report it (the Node
  // kernel's watchdog ending code left running between calls) says so; other ends say what the pod says.
  const killed = (terminated: { exitCode: number; reason?: string }, extra: Partial<V1Pod['status']> = {}): V1Pod => ({
    ...failedAfterStop,
    status: {
      ...failedAfterStop.status,
      ...extra,
      containerStatuses: [
        { ...failedAfterStop.status?.containerStatuses?.[0], name: 'sandbox', image: 'i', imageID: '', ready: false, restartCount: 0, state: { terminated } },
      ],
    },
  });
  it.each<[string, V1Pod, { phase: 'Ready' } | undefined, boolean]>([
    ['killed after ready', killed({ exitCode: 137 }), { phase: 'Ready' }, true],
    ['killed for its memory', killed({ exitCode: 137, reason: 'OOMKilled' }), { phase: 'Ready' }, false],
    ['ended at its active deadline', killed({ exitCode: 137 }, { reason: 'DeadlineExceeded' }), { phase: 'Ready' }, false],
    ['exited on its own', killed({ exitCode: 3, reason: 'Error' }), { phase: 'Ready' }, false],
    ['killed before it was ever ready', killed({ exitCode: 137 }), undefined, false],
  ])('a session whose interpreter was %s', (_n, pod, status, saysKilled) => {
    const s = computeSessionStatus(session(status), pod, 'p', exp, false, now);
    expect(s.message === KILLED_INTERPRETER_MESSAGE).toBe(saysKilled);
    expect(SandboxSessionStatusSchema.safeParse(s).success).toBe(true);
  });

  // The controller's own refusals (limits, profile, NetworkPolicy, a pod of someone else's under
  // the name) apply the whole status like every other: what it said before stays, and the status
  // says when the session goes and why it is not Ready.
  it.each([
    ['a new session', undefined],
    ['a Ready session', { phase: 'Ready' as const, podName: 'p', reason: 'KernelReady', lastActivityTime: '2026-11-22T11:59:00Z' }],
  ])('refusedStatus: %s is Failed, keeps its pod and says when it expires', (_n, status) => {
    const s = refusedStatus(session(status), exp, 'InvalidSpec', 'beyond the limits', now);
    expect(s).toMatchObject({ ...status, phase: 'Failed', reason: 'InvalidSpec', message: 'beyond the limits', expiresAt: exp.toISOString() });
    expect(s.conditions).toEqual([expect.objectContaining({ type: 'Ready', status: 'False', reason: 'InvalidSpec', message: 'beyond the limits' })]);
    expect(SandboxSessionStatusSchema.safeParse(s).success).toBe(true);
  });

  it('writes nothing when nothing changed', () => {
    const first = computeSessionStatus(session(), readyPod, 'p', exp, false, now);
    const again = computeSessionStatus(session(first), readyPod, 'p', exp, false, new Date(now.getTime() + 5000));
    expect(sessionStatusChanged(first, again)).toBe(false);
    expect(sessionStatusChanged(first, { ...again, expiresAt: '2026-11-22T12:11:00.000Z' })).toBe(true);
  });

  it('says what the gateway saw when it reported the interpreter dead', () => {
    const s = computeSessionStatus(
      session({ phase: 'Ready', kernelLost: { message: 'the sandbox broke the kernel protocol', time: '2026-11-22T11:59:00Z' } }),
      readyPod,
      'p',
      exp,
      false,
      now,
    );
    expect(s).toMatchObject({ phase: 'Lost', reason: 'KernelLost' });
    expect(s.message).toContain('the sandbox broke the kernel protocol');
  });

  // The pod's status (kubelet, scheduler) and the installer's text are not bounded where they are
  // made: a message over the CRD's maxLength would have the status refused, the session never Failed.
  const long = 'x'.repeat(40_000);
  const astral = '😀'.repeat(20_000);
  it.each<[string, () => ReturnType<typeof computeSessionStatus>, string]>([
    [
      'a failed pod with a long message',
      () => computeSessionStatus(session(), { metadata: { name: 'p' }, status: { phase: 'Failed', message: long } }, 'p', exp, false, now),
      'Failed',
    ],
    [
      'a pending pod the scheduler explains at length',
      () =>
        computeSessionStatus(
          session(),
          {
            metadata: { name: 'p' },
            status: { phase: 'Pending', conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: astral }] },
          },
          'p',
          exp,
          true,
          now,
        ),
      'Failed',
    ],
    ['packages that failed with a long sentence', () => failedStatus({ phase: 'Pending' }, 'PackagesFailed', long, 1, now), 'Failed'],
    ['a refusal with a long sentence', () => refusedStatus(session(), exp, 'InvalidSpec', long, now), 'Failed'],
  ])('bounds the messages: %s', (_n, compute, phase) => {
    const s = compute();
    expect(s.phase).toBe(phase);
    expect(s.message?.length).toBeLessThanOrEqual(MAX_MESSAGE_LENGTH);
    for (const c of s.conditions ?? []) expect(c.message.length).toBeLessThanOrEqual(MAX_MESSAGE_LENGTH);
    expect(SandboxSessionStatusSchema.safeParse(s).success).toBe(true);
  });
});

describe('one writer per session status field', () => {
  const full = {
    phase: 'Ready' as const,
    podName: 'p',
    expiresAt: 'e',
    lastActivityTime: 't',
    runCount: 3,
    kernelLost: { message: 'm', time: 't' },
    reason: 'r',
    message: 'm',
  };
  it('the controller applies none of the gateway-owned fields', () => {
    expect(controllerOwned(full)).toEqual({ phase: 'Ready', podName: 'p', expiresAt: 'e', reason: 'r', message: 'm' });
  });
  it.each([
    ['runCount', { runCount: 4 }, false],
    ['lastActivityTime', { lastActivityTime: 'later' }, false],
    ['kernelLost', { kernelLost: { message: 'x', time: 'y' } }, false],
    ['phase', { phase: 'Lost' as const }, true],
    ['expiresAt', { expiresAt: 'later' }, true],
  ])('a change of %s alone needs a controller write: %s', (_f, change, expected) => {
    expect(sessionStatusChanged(full, { ...full, ...change })).toBe(expected);
  });
});
