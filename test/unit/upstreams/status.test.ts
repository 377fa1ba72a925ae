import { describe, expect, it } from 'vitest';
import { MAX_MESSAGE_LENGTH, MAX_UPSTREAM_ERROR_LENGTH, UpstreamServerStatusSchema, type UpstreamServerStatus } from '../../../src/api/v1alpha1/index.js';
import { computeStatus, sameStatus, type Observation } from '../../../src/upstreams/status.js';

const T0 = new Date('2026-11-24T01:00:00.000Z');
const T1 = new Date('2026-11-24T01:05:00.000Z');
const refreshed = new Date('2026-11-24T00:59:30.123Z');

const ready: Observation = { kind: 'connection', ready: true, reason: 'CatalogLoaded', toolCount: 12, refreshedAt: refreshed };
const down: Observation = {
  kind: 'connection',
  ready: false,
  reason: 'Unreachable',
  error: 'fetch failed: ECONNREFUSED',
  toolCount: 0,
  refreshedAt: refreshed,
};

describe('computeStatus', () => {
  it.each<[string, Observation, Partial<UpstreamServerStatus> & { ready: [string, string, string] }]>([
    ['ready', ready, { toolCount: 12, lastRefreshTime: '2026-11-24T00:59:30Z', ready: ['True', 'CatalogLoaded', 'Connected; 12 tools offered.'] }],
    [
      'unreachable',
      down,
      {
        toolCount: 0,
        lastError: 'fetch failed: ECONNREFUSED',
        lastRefreshTime: '2026-11-24T00:59:30Z',
        ready: ['False', 'Unreachable', 'fetch failed: ECONNREFUSED'],
      },
    ],
    [
      'connecting',
      { kind: 'connection', ready: false, reason: 'Connecting', toolCount: 0 },
      { toolCount: 0, ready: ['False', 'Connecting', 'Connecting to the upstream.'] },
    ],
    [
      'invalid spec',
      { kind: 'invalid', message: 'Invalid UpstreamServer: spec.url must be …' },
      { toolCount: 0, lastError: 'Invalid UpstreamServer: spec.url must be …', ready: ['False', 'InvalidSpec', 'Invalid UpstreamServer: spec.url must be …'] },
    ],
    [
      'secret missing',
      { kind: 'secret-missing', message: 'Secret k does not exist' },
      { toolCount: 0, lastError: 'Secret k does not exist', ready: ['False', 'SecretNotFound', 'Secret k does not exist'] },
    ],
    ['waiting for secrets', { kind: 'waiting' }, { toolCount: 0, ready: ['False', 'Connecting', 'Reading the Secrets the spec names.'] }],
    [
      'a stdio server starting (not an error)',
      { kind: 'stdio', reason: 'ServerStarting', message: "Waiting for the server's pod to become ready." },
      { toolCount: 0, ready: ['False', 'ServerStarting', "Waiting for the server's pod to become ready."] },
    ],
    [
      'a stdio server failing',
      { kind: 'stdio', reason: 'ServerFailing', message: 'Pod mcp-fs-1: container server: ImagePullBackOff' },
      {
        toolCount: 0,
        lastError: 'Pod mcp-fs-1: container server: ImagePullBackOff',
        ready: ['False', 'ServerFailing', 'Pod mcp-fs-1: container server: ImagePullBackOff'],
      },
    ],
  ])('%s', (_name, o, expected) => {
    const { ready: cond, ...rest } = expected;
    const s = computeStatus(undefined, 3, o, T0);
    expect(s).toMatchObject({ observedGeneration: 3, ...rest });
    expect(s.conditions).toEqual([
      { type: 'Ready', status: cond[0], reason: cond[1], message: cond[2], observedGeneration: 3, lastTransitionTime: T0.toISOString() },
    ]);
    if (!('lastError' in rest)) expect(s.lastError).toBeUndefined();
  });

  it('is the same when computed twice from the same observation (no write per ping)', () => {
    const first = computeStatus(undefined, 1, ready, T0);
    const second = computeStatus(first, 1, ready, T1);
    expect(second).toEqual(first);
    expect(sameStatus(first, second)).toBe(true);
  });

  it('keeps the last error after recovery, and the transition time of an unchanged condition', () => {
    const failed = computeStatus(undefined, 1, down, T0);
    const recovered = computeStatus(failed, 1, ready, T1);
    expect(recovered.lastError).toBe('fetch failed: ECONNREFUSED');
    expect(recovered.conditions?.[0]).toMatchObject({ status: 'True', lastTransitionTime: T1.toISOString() });
    expect(sameStatus(failed, recovered)).toBe(false);
  });

  it.each<[string, Partial<UpstreamServerStatus>]>([
    ['tool count', { toolCount: 13 }],
    ['refresh time', { lastRefreshTime: '2026-11-24T02:00:00Z' }],
    ['generation', { observedGeneration: 2 }],
  ])('sees a change of the %s', (_name, change) => {
    const s = computeStatus(undefined, 1, ready, T0);
    expect(sameStatus(s, { ...s, ...change })).toBe(false);
  });

  // An invalid spec's message lists every problem, and a Secret's read error quotes the API server:
  // neither is bounded where it is made, and a lastError or message over the CRD's maxLength would
  // have the whole status refused.
  it.each<[string, Observation]>([
    ['an invalid spec with many problems', { kind: 'invalid', message: `Invalid UpstreamServer: ${'spec.tools.allow[0] must be a tool name; '.repeat(1000)}` }],
    ['an unreadable Secret', { kind: 'secret-missing', message: `Cannot read Secret s: ${'é'.repeat(2000)}` }],
    ['a connection error in astral text', { kind: 'connection', ready: false, reason: 'Unreachable', error: '😀'.repeat(40_000), toolCount: 0 }],
  ])('bounds lastError and the condition message: %s', (_name, o) => {
    const s = computeStatus(undefined, 1, o, T0);
    expect(s.lastError?.length).toBeLessThanOrEqual(MAX_UPSTREAM_ERROR_LENGTH);
    expect(s.lastError).toMatch(/…$/);
    for (const c of s.conditions ?? []) expect(c.message.length).toBeLessThanOrEqual(MAX_MESSAGE_LENGTH);
    expect(UpstreamServerStatusSchema.safeParse(s).success).toBe(true);
  });
});
