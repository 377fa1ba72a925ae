// The session name of a tool call is the caller's text. A name no object can have is no session,
// and is never put in a request path: "." would make the read a list of every user's sessions.
import { describe, expect, it } from 'vitest';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { KubeClients } from '../../../src/kube/clients.js';
import type { ResilientInformer } from '../../../src/kube/informer.js';
import { SessionStore } from '../../../src/sessions/store.js';

/** The API requests the store made (by name); every one answers 404. */
function storeWithRequests(): { store: SessionStore; names: string[] } {
  const names: string[] = [];
  const notFound = Object.assign(new Error('not found'), { code: 404 });
  const clients = {
    custom: {
      getNamespacedCustomObject: async (req: { name: string }): Promise<never> => {
        names.push(req.name);
        throw notFound;
      },
    },
  } as unknown as KubeClients;
  const informer = { onChange: () => undefined, get: () => undefined } as unknown as ResilientInformer<KubernetesObject>;
  return { store: new SessionStore(clients, informer, 'codemode'), names };
}

describe('SessionStore.read with a caller-given name', () => {
  it.each([
    ['.', false],
    ['..', false],
    ['', false],
    ['a/b', false],
    ['Sess-ABC', false],
    ['-sess', false],
    ['sess\n', false],
    ['s'.repeat(254), false],
    ['sess-abc12', true],
    ['s'.repeat(253), true],
  ])('%j: asks the API server: %s', async (name, asked) => {
    const { store, names } = storeWithRequests();
    expect(await store.read(name)).toBeUndefined();
    expect(names).toEqual(asked ? [name] : []);
  });
});
