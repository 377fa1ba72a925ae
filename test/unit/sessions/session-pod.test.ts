// Which pod a session may use (src/sessions/session-pod.ts): only one it controls, whatever its
// status names; a cached copy without the owner (a claim the cache has not seen) is read again.
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { controls, sessionPod } from '../../../src/sessions/session-pod.js';

const pod = (owners: Array<{ uid: string; controller?: boolean }>, name = 'p'): V1Pod => ({
  metadata: { name, ownerReferences: owners.map((o) => ({ apiVersion: 'codemode.dev/v1alpha1', kind: 'SandboxSession', name: 's', ...o })) },
});

describe('controls', () => {
  it.each<[string, string | undefined, V1Pod | undefined, boolean]>([
    ['its controller', 'u1', pod([{ uid: 'u1', controller: true }]), true],
    ['owned, not as controller', 'u1', pod([{ uid: 'u1' }]), false],
    ['controlled by another', 'u1', pod([{ uid: 'u2', controller: true }]), false],
    ['no owner (an unclaimed pool pod)', 'u1', pod([]), false],
    ['no pod', 'u1', undefined, false],
    ['a session without a uid controls nothing', undefined, pod([{ uid: '', controller: true }]), false],
    ['an empty uid matches nothing', '', pod([{ uid: '', controller: true }]), false],
  ])('%s', (_name, uid, p, expected) => {
    expect(controls(uid, p)).toBe(expected);
  });
});

describe('sessionPod', () => {
  const own = pod([{ uid: 'u1', controller: true }]);
  const foreign = pod([{ uid: 'u2', controller: true }]);
  const unowned = pod([]);
  it.each<[string, V1Pod | undefined, V1Pod | undefined, string, number]>([
    ['own in the cache: no read', own, foreign, 'own', 0],
    ['the cache lags behind the claim: read, own', unowned, own, 'own', 1],
    ['foreign in the cache and the API server', foreign, foreign, 'foreign', 1],
    ['an unclaimed pod stays foreign', unowned, unowned, 'foreign', 1],
    ['not cached, not there', undefined, undefined, 'none', 1],
    ['not cached, there and foreign', undefined, foreign, 'foreign', 1],
    ['gone since it was cached', foreign, undefined, 'none', 1],
  ])('%s', async (_name, cached, live, kind, reads) => {
    let n = 0;
    const found = await sessionPod('u1', cached, () => {
      n++;
      return Promise.resolve(live);
    });
    expect(found.kind).toBe(kind);
    expect(n).toBe(reads);
  });
});
