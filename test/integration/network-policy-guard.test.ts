// NetworkPolicyGuard.inPodCheck on the real API server: for a while after the sandbox policy came
// (back) in place, code sent to a kernel carries "netcheck" (the kernel first checks that its pod
// has no network), once per pod until the policy next comes back; never once the window is over.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NetworkPolicyGuard } from '../../src/controller/network-policy.js';
import { SANDBOX_NETWORK_POLICY_NAME } from '../../src/sandbox/networkpolicy.js';
import { deleteNamespace, until } from '../e2e/helpers/kube.js';
import { log } from './helpers/rig.js';
import { clients, createNamespace, k } from './helpers/table.js';

let ns = '';
beforeAll(async () => {
  ns = await createNamespace('guard');
});
afterAll(async () => {
  await deleteNamespace(k, ns);
});

async function started(options: ConstructorParameters<typeof NetworkPolicyGuard>[4]): Promise<NetworkPolicyGuard> {
  const guard = new NetworkPolicyGuard(clients, ns, log, undefined, { settleMs: 0, ...options });
  await guard.start();
  await guard.ensure(ns);
  return guard;
}

describe('inPodCheck', () => {
  it('asks each pod once after the policy came in place (not one created after ensure), and again after it came back', async () => {
    const guard = await started({ inPodCheckMs: 600_000 });
    try {
      const a = guard.inPodCheck(ns, 'pod-a');
      expect(a, 'the policy was just created').toBeTypeOf('function');
      expect(guard.inPodCheck(ns, 'pod-a'), 'not passed yet: asked again').toBeTypeOf('function');
      a?.();
      expect(guard.inPodCheck(ns, 'pod-a'), 'its check passed').toBeUndefined();
      expect(guard.inPodCheck(ns, 'pod-b'), 'another pod').toBeTypeOf('function');

      const created = guard.createdAfterEnsure(ns);
      created('pod-new');
      expect(guard.inPodCheck(ns, 'pod-new'), 'created after ensure: its kernel checked at start').toBeUndefined();
      const createdBeforeRestore = guard.createdAfterEnsure(ns);

      const before = await clients.networking.readNamespacedNetworkPolicy({ namespace: ns, name: SANDBOX_NETWORK_POLICY_NAME });
      const stale = guard.inPodCheck(ns, 'pod-c');
      await clients.networking.deleteNamespacedNetworkPolicy({ namespace: ns, name: SANDBOX_NETWORK_POLICY_NAME });
      await until(
        async () =>
          (await clients.networking.readNamespacedNetworkPolicy({ namespace: ns, name: SANDBOX_NETWORK_POLICY_NAME }).catch(() => undefined))?.metadata?.uid !==
          before.metadata?.uid,
        30_000,
        'the guard to restore the policy',
      );
      await guard.ensure(ns);
      stale?.();
      createdBeforeRestore('pod-late');
      expect(guard.inPodCheck(ns, 'pod-a'), 'the policy came back: pod-a is asked again').toBeTypeOf('function');
      expect(guard.inPodCheck(ns, 'pod-c'), 'a check that passed before the restore does not count').toBeTypeOf('function');
      expect(guard.inPodCheck(ns, 'pod-new'), 'created before the restore').toBeTypeOf('function');
      expect(guard.inPodCheck(ns, 'pod-late'), 'created after the restore, but ensured before it').toBeTypeOf('function');
      guard.createdAfterEnsure(ns)('pod-d');
      expect(guard.inPodCheck(ns, 'pod-d'), 'created after ensure in this epoch').toBeUndefined();
      expect(guard.inPodCheck('elsewhere', 'pod-a'), 'a namespace it does not guard').toBeTypeOf('function');
    } finally {
      await guard.stop();
    }
  });

  it('asks nothing once the policy has been in place for the whole window', async () => {
    const guard = await started({ inPodCheckMs: 1 });
    try {
      await new Promise((r) => setTimeout(r, 1100));
      expect(guard.inPodCheck(ns, 'pod-a')).toBeUndefined();
    } finally {
      await guard.stop();
    }
  });
});
