// close_session against the real API server with a session cache behind it: the session the
// caller may close is deleted, never another user's session that took its name meanwhile.
import type { KubernetesObject } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { API_VERSION, GROUP, SANDBOXSESSION_KIND, SANDBOXSESSION_PLURAL, VERSION } from '../../src/api/v1alpha1/index.js';
import type { KernelConnections } from '../../src/exec/kernel.js';
import { customResourceInformer } from '../../src/kube/informer.js';
import { SessionService } from '../../src/sessions/service.js';
import { deleteNamespace, until } from '../e2e/helpers/kube.js';
import { log } from './helpers/rig.js';
import { clients, createNamespace, k, readyInCache } from './helpers/table.js';

const api = { group: GROUP, version: VERSION, plural: SANDBOXSESSION_PLURAL };
const alice = { user: 'alice' };

function session(namespace: string, user: string): Record<string, unknown> {
  return {
    apiVersion: API_VERSION,
    kind: SANDBOXSESSION_KIND,
    metadata: { name: 'x', namespace },
    spec: { owner: { user }, language: 'python', idleTimeoutSeconds: 600 },
  };
}

describe('SessionService.close with a cache behind the API server', () => {
  it("does not delete another user's session that took the name of the caller's deleted one", async () => {
    const ns = await createNamespace('int-close');
    const informer = customResourceInformer(clients, ns, SANDBOXSESSION_PLURAL, log);
    try {
      await clients.custom.createNamespacedCustomObject({ ...api, namespace: ns, body: session(ns, 'alice') });
      // Ready in the cache: the service then takes the cache's word without reading the API.
      await readyInCache(informer, ns, 'x');
      // The cache stops here (a watch that has not delivered yet): alice's session is deleted,
      // and bob's of the same name created.
      await informer.stop();
      await clients.custom.deleteNamespacedCustomObject({ ...api, namespace: ns, name: 'x' });
      await until(
        async () =>
          await clients.custom.getNamespacedCustomObject({ ...api, namespace: ns, name: 'x' }).then(
            () => false,
            () => true,
          ),
        10_000,
        "alice's session to be gone",
      );
      const bobs = (await clients.custom.createNamespacedCustomObject({ ...api, namespace: ns, body: session(ns, 'bob') })) as KubernetesObject;

      const kernels = { drop: () => undefined } as unknown as KernelConnections;
      const service = new SessionService(
        clients,
        informer,
        kernels,
        {
          namespace: ns,
          outputCapChars: 1000,
          maxFileBytes: 1000,
          sessionMaxIdleTimeoutSeconds: 3600,
          sessionMaxLifetimeSeconds: 86400,
          startupTimeoutSeconds: 5,
        },
        log,
      );
      expect(await service.close('x', alice)).toBe(false);
      const left = (await clients.custom.getNamespacedCustomObject({ ...api, namespace: ns, name: 'x' })) as KubernetesObject;
      expect(left.metadata?.uid, "bob's session was deleted by alice's close_session").toBe(bobs.metadata?.uid);
    } finally {
      await informer.stop();
      await deleteNamespace(k, ns);
    }
  });
});

describe('SessionService.create when the session is deleted while it starts', () => {
  it('says the session was deleted, not that it did not start in time', async () => {
    const ns = await createNamespace('int-create');
    const informer = customResourceInformer(clients, ns, SANDBOXSESSION_PLURAL, log);
    try {
      await informer.start();
      const kernels = { drop: () => undefined } as unknown as KernelConnections;
      const opts = { namespace: ns, outputCapChars: 1000, maxFileBytes: 1000, sessionMaxIdleTimeoutSeconds: 3600, sessionMaxLifetimeSeconds: 86400 };
      // No controller runs here: the session never starts, as one whose pod waits for capacity.
      const service = new SessionService(clients, informer, kernels, { ...opts, startupTimeoutSeconds: 120 }, log);
      // Its refusal is handled from the start: it may come (the watch seeing the delete) before
      // the delete's own answer, which an unhandled rejection would make a failed run.
      const created = service.create('python', undefined, undefined, alice).then(
        () => undefined,
        (err: unknown) => err,
      );
      await until(() => informer.list(ns).length > 0, 10_000, 'the session in the cache');
      const name = informer.list(ns)[0]?.metadata?.name ?? '';
      await clients.custom.deleteNamespacedCustomObject({ ...api, namespace: ns, name });
      const refusal = await created;
      expect(refusal, 'create_session did not fail').toBeInstanceOf(Error);
      expect(String(refusal)).toContain(`Session ${name} was deleted before it became ready`);
    } finally {
      await informer.stop();
      await deleteNamespace(k, ns);
    }
  });
});
