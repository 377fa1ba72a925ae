// A stdio UpstreamServer's objects are deleted by the leader once the server is no longer stdio
// (now a url). The watcher's copy of the server can be behind an edit back to stdio (a leader that
// took over with a lagging cache): the objects stay while the API server's copy is stdio.
import type { KubernetesObject } from '@kubernetes/client-node';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { API_VERSION, GROUP, LABEL_UPSTREAM_SERVER, UPSTREAMSERVER_KIND, UPSTREAMSERVER_PLURAL, VERSION } from '../../src/api/v1alpha1/index.js';
import { StdioRuntime } from '../../src/upstreams/stdio-runtime.js';
import { stdioObjectName } from '../../src/upstreams/stdio-objects.js';
import { deleteNamespace, until } from '../e2e/helpers/kube.js';
import { log } from './helpers/rig.js';
import { clients, createNamespace, k } from './helpers/table.js';

const api = { group: GROUP, version: VERSION, plural: UPSTREAMSERVER_PLURAL };
const STDIO = { image: 'codemode.local/mcp-filesystem:v1', command: ['/bin/true'] };

describe('StdioRuntime.cleanup', () => {
  it('deletes the objects of a server that is a url now, and none while the API server has it stdio', async () => {
    const ns = await createNamespace('int-stdio');
    const runtime = new StdioRuntime(
      clients,
      ns,
      { bridgeImage: 'codemode.local/stdio-bridge:v1', gatewayPodLabels: {}, sessionIdleSeconds: 60 },
      log,
      () => true,
      () => {},
    );
    try {
      const server = (await clients.custom.createNamespacedCustomObject({
        ...api,
        namespace: ns,
        body: { apiVersion: API_VERSION, kind: UPSTREAMSERVER_KIND, metadata: { name: 'u' }, spec: { stdio: STDIO } },
      })) as KubernetesObject;
      const name = stdioObjectName('u');
      await clients.core.createNamespacedService({
        namespace: ns,
        body: {
          metadata: {
            name,
            labels: { [LABEL_UPSTREAM_SERVER]: name },
            ownerReferences: [{ apiVersion: API_VERSION, kind: UPSTREAMSERVER_KIND, name: 'u', uid: server.metadata?.uid ?? '', controller: true }],
          },
          spec: { ports: [{ port: 8080 }], selector: { [LABEL_UPSTREAM_SERVER]: name } },
        },
      });
      await runtime.start();
      await until(() => runtime.clusterIP('u') !== undefined, 10_000, 'the Service in the runtime cache');
      const service = (): Promise<boolean> =>
        clients.core.readNamespacedService({ namespace: ns, name }).then(
          () => true,
          () => false,
        );

      // Told "no longer stdio" from a copy behind the API server's, which is stdio.
      runtime.cleanup('u');
      await new Promise((done) => setTimeout(done, 1000));
      expect(await service(), 'the Service of a server that is stdio was deleted').toBe(true);

      await clients.custom.patchNamespacedCustomObject(
        { ...api, namespace: ns, name: 'u', body: { spec: { stdio: null, url: 'http://example.invalid/mcp' } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      runtime.cleanup('u');
      await until(async () => !(await service()), 10_000, 'the Service of a former stdio server deleted');
    } finally {
      await runtime.stop();
      await deleteNamespace(k, ns);
    }
  });
});
