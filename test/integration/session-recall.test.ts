// Reading back the call of a SandboxRun in a session whose executor stopped (recovery), against
// the real API server: only a session the run's owner may use is asked, never another user's
// session that took the name since (its kernel could answer for the run with any outcome).
import { describe, expect, it } from 'vitest';
import { API_VERSION, GROUP, SANDBOXSESSION_KIND, SANDBOXSESSION_PLURAL, VERSION } from '../../src/api/v1alpha1/index.js';
import type { KernelConnections } from '../../src/exec/kernel.js';
import { customResourceInformer } from '../../src/kube/informer.js';
import { SessionService } from '../../src/sessions/service.js';
import { deleteNamespace } from '../e2e/helpers/kube.js';
import { log } from './helpers/rig.js';
import { clients, createNamespace, k, readyInCache } from './helpers/table.js';

const api = { group: GROUP, version: VERSION, plural: SANDBOXSESSION_PLURAL };

describe('SessionService.recall', () => {
  it.each([
    ["another user's session of the name: not asked", { user: 'alice' }, false],
    ["the owner's own session: asked", { user: 'bob' }, true],
    ['a member of an admin group: asked', { user: 'carol', groups: ['admins'] }, true],
  ])('%s', async (_name, caller, asked) => {
    const ns = await createNamespace('int-recall');
    const informer = customResourceInformer(clients, ns, SANDBOXSESSION_PLURAL, log);
    try {
      const body = { apiVersion: API_VERSION, kind: SANDBOXSESSION_KIND, metadata: { name: 'x' }, spec: { owner: { user: 'bob' }, language: 'python' } };
      await clients.custom.createNamespacedCustomObject({ ...api, namespace: ns, body });
      await readyInCache(informer, ns, 'x');
      const asks: string[] = [];
      const kernels = {
        get: async (_ns: string, pod: string) => {
          asks.push(pod);
          throw new Error('no kernel here');
        },
        drop: () => undefined,
      } as unknown as KernelConnections;
      const opts = {
        namespace: ns,
        outputCapChars: 1000,
        maxFileBytes: 1000,
        sessionMaxIdleTimeoutSeconds: 3600,
        sessionMaxLifetimeSeconds: 86400,
        startupTimeoutSeconds: 5,
      };
      const service = new SessionService(clients, informer, kernels, { ...opts, adminGroups: ['admins'] }, log);
      // A kernel that cannot be reached: undefined, or the error (session-run.ts logs it).
      expect(await service.recall('x', 'run-uid', 500, caller).catch(() => undefined)).toBeUndefined();
      expect(asks.length > 0).toBe(asked);
    } finally {
      await informer.stop();
      await deleteNamespace(k, ns);
    }
  });
});
