import { describe, expect, it } from 'vitest';
import type { KubernetesObject } from '@kubernetes/client-node';
import { LABEL_OWNER, SessionReasons } from '../../../src/api/v1alpha1/index.js';
import { ANNOTATION_EXECUTOR, AUDIT_EXECUTOR } from '../../../src/api/v1alpha1/labels.js';
import { UserLimits, userRefusal, userUsage, type LocalUse, type UserCaps, type UserUsage } from '../../../src/limits/user-limits.js';
import { AdmissionError } from '../../../src/limits/admission.js';

const NOW = Date.parse('2026-11-23T12:00:00Z');
const ago = (s: number): string => new Date(NOW - s * 1000).toISOString();

function run(
  name: string,
  user: string,
  o: { phase?: string; created?: number; started?: number; session?: string; audit?: boolean; deleting?: boolean; label?: string } = {},
): KubernetesObject {
  return {
    metadata: {
      name,
      labels: { [LABEL_OWNER]: o.label ?? user },
      creationTimestamp: ago(o.created ?? 1) as unknown as Date,
      ...(o.audit && { annotations: { [ANNOTATION_EXECUTOR]: AUDIT_EXECUTOR } }),
      ...(o.deleting && { deletionTimestamp: ago(0) as unknown as Date }),
    },
    spec: { owner: { user }, timeoutSeconds: 30, ...(o.session && { session: o.session }) },
    ...((o.phase || o.started !== undefined) && {
      status: { ...(o.phase && { phase: o.phase }), ...(o.started !== undefined && { startTime: ago(o.started) }) },
    }),
  } as KubernetesObject;
}
const session = (name: string, user: string, expiresIn?: number): KubernetesObject =>
  ({
    metadata: { name, labels: { [LABEL_OWNER]: user } },
    spec: { owner: { user } },
    ...(expiresIn !== undefined && { status: { expiresAt: new Date(NOW + expiresIn * 1000).toISOString() } }),
  }) as KubernetesObject;

describe('userUsage (what every replica sees, plus what this one started)', () => {
  it.each<[string, KubernetesObject[], KubernetesObject[], Array<[string, LocalUse]>, Partial<UserUsage>]>([
    ['nothing', [], [], [], { runs: 0, sessions: 0, executions: 0 }],
    [
      'a running run counts as running and as an execution',
      [run('a', 'alice', { phase: 'Running', created: 5 })],
      [],
      [],
      { runs: 1, executions: 1, nextRunDeadlineSeconds: 25 },
    ],
    [
      'a finished run counts only for the rate',
      [run('a', 'alice', { phase: 'Succeeded', started: 10 })],
      [],
      [],
      { runs: 0, executions: 1, oldestExecutionLeavesSeconds: 50 },
    ],
    ['an execution older than a minute does not count', [run('a', 'alice', { phase: 'Succeeded', created: 90, started: 61 })], [], [], { executions: 0 }],
    ['an audit record counts for the rate only', [run('a', 'alice', { audit: true, session: 's', started: 3 })], [], [], { runs: 0, executions: 1 }],
    [
      'an audit record of several calls counts each call in the minute, under its own name',
      [
        {
          ...run('c1', 'alice', { audit: true, session: 's', started: 70 }),
          status: { phase: 'Succeeded', startTime: ago(70), calls: [70, 30, 2].map((s, i) => ({ name: `c${i + 1}`, startTime: ago(s) })) },
        } as KubernetesObject,
      ],
      [],
      // c3 is also held locally (admitted here, its record just written): counted once.
      [['c3', { user: 'alice', running: false, executedAtMs: NOW - 2000 }]],
      { runs: 0, executions: 2, oldestExecutionLeavesSeconds: 30 },
    ],
    ['a kubectl run in a session is no transient run', [run('a', 'alice', { session: 's' })], [], [], { runs: 0, executions: 1 }],
    ["another user's objects do not count", [run('a', 'bob', { phase: 'Running' })], [session('s', 'bob')], [], { runs: 0, sessions: 0, executions: 0 }],
    ['a label that matches but another spec owner does not count', [run('a', 'mallory', { label: 'alice' })], [], [], { runs: 0 }],
    ['a run being deleted does not count', [run('a', 'alice', { deleting: true })], [], [], { runs: 0, executions: 0 }],
    ['sessions, with the soonest expiry', [], [session('s1', 'alice', 300), session('s2', 'alice', 100)], [], { sessions: 2, nextSessionExpirySeconds: 100 }],
    [
      'local entries not yet in the cache count, the cache ones once',
      [run('a', 'alice', { phase: 'Running' })],
      [],
      [
        ['a', { user: 'alice', running: true, executedAtMs: NOW - 1000 }],
        ['b', { user: 'alice', running: true, executedAtMs: NOW }],
        ['c', { user: 'alice', running: false, executedAtMs: NOW - 2000 }],
      ],
      { runs: 2, executions: 3 },
    ],
    [
      'a session the controller refused for the limit (applied with kubectl) does not count',
      [],
      [session('s1', 'alice'), { ...session('s2', 'alice'), status: { phase: 'Failed', reason: SessionReasons.UserSessionLimit } } as KubernetesObject],
      [],
      { sessions: 1 },
    ],
    ['a session being created counts', [], [session('s1', 'alice')], [['s2', { user: 'alice', running: false, creatingSession: true }]], { sessions: 2 }],
  ])('%s', (_n, runs, sessions, local, expected) => {
    expect(userUsage(runs, sessions, new Map(local), 'alice', NOW)).toMatchObject(expected);
  });
});

describe('userRefusal (which limit, how full, when to retry)', () => {
  const caps: UserCaps = { runs: 2, sessions: 1, executionsPerMinute: 5 };
  const idle: UserUsage = { runs: 0, sessions: 0, executions: 0 };
  it.each<[string, 'run' | 'session_call' | 'session', Partial<UserUsage>, Partial<UserCaps>, string | undefined, RegExp | undefined]>([
    ['run within every limit', 'run', { runs: 1, executions: 4 }, {}, undefined, undefined],
    [
      'run at the run limit',
      'run',
      { runs: 2, nextRunDeadlineSeconds: 3.2 },
      {},
      'user_runs',
      /you have 2 of 2 runs executing across all gateway replicas \(CODEMODE_USER_MAX_RUNS\)[\s\S]*Retry in 4 seconds/,
    ],
    ['run at the run limit, hint capped', 'run', { runs: 2, nextRunDeadlineSeconds: 600 }, {}, 'user_runs', /Retry in 10 seconds/],
    [
      'run at the rate limit',
      'run',
      { executions: 5, oldestExecutionLeavesSeconds: 12.5 },
      {},
      'user_executions_per_minute',
      /you started 5 of 5 executions in the last 60 seconds[\s\S]*Retry in 13 seconds/,
    ],
    ['session call ignores the run limit', 'session_call', { runs: 9 }, {}, undefined, undefined],
    ['session call at the rate limit', 'session_call', { executions: 6 }, {}, 'user_executions_per_minute', /^The call was refused/],
    [
      'session at the session limit',
      'session',
      { sessions: 1, nextSessionExpirySeconds: 42 },
      {},
      'user_sessions',
      /you have 1 of 1 sessions live[\s\S]*retry in 42 seconds, when your next idle session expires/,
    ],
    ['session ignores the rate', 'session', { executions: 99 }, {}, undefined, undefined],
    ['0 means unlimited', 'run', { runs: 99, sessions: 99, executions: 99 }, { runs: 0, executionsPerMinute: 0 }, undefined, undefined],
    ['0 sessions means unlimited', 'session', { sessions: 99 }, { sessions: 0 }, undefined, undefined],
  ])('%s', (_n, action, usage, capsOver, limit, text) => {
    const r = userRefusal(action, { ...idle, ...usage }, { ...caps, ...capsOver });
    expect(r?.limit).toBe(limit);
    if (text) expect(`${r?.message}\n${r?.hint}`).toMatch(text);
  });
});

describe('UserLimits', () => {
  it('holds what it admitted until the cache can show it, and lets the minute pass', () => {
    let now = NOW;
    const l = new UserLimits({ caps: { runs: 1, sessions: 0, executionsPerMinute: 2 }, namespace: 'n', runs: () => [], sessions: () => [], now: () => now });
    const alice = { user: 'alice' };
    const hold = l.admit('run', 'r1', alice);
    expect(() => l.admit('run', 'r2', alice)).toThrow(AdmissionError);
    expect(() => l.admit('run', 'x', { user: 'bob' })).not.toThrow();
    hold.end();
    // A call refused for capacity after admission started nothing: it does not count.
    l.admit('session_call', 'c0', alice).cancel();
    l.admit('session_call', 'c1', alice);
    expect(() => l.admit('session_call', 'c2', alice)).toThrow(/user_executions_per_minute/);
    now += 61_000;
    expect(() => l.admit('session_call', 'c3', alice)).not.toThrow();
    expect(() => l.admit('run', 'r3', undefined)).not.toThrow();
  });
});
