// UpstreamServer objects in a test's namespace: create one, read its status and Ready condition.
import { GROUP, UPSTREAMSERVER_PLURAL, VERSION, type UpstreamServerStatus } from '../../../src/api/v1alpha1/index.js';
import type { TestKube } from './kube.js';

export async function createUpstream(k: TestKube, namespace: string, name: string, spec: Record<string, unknown>): Promise<void> {
  await k.custom.createNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace,
    plural: UPSTREAMSERVER_PLURAL,
    body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'UpstreamServer', metadata: { name }, spec },
  });
}

export async function upstreamStatus(k: TestKube, namespace: string, name: string): Promise<UpstreamServerStatus | undefined> {
  const o = (await k.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: UPSTREAMSERVER_PLURAL, name })) as {
    status?: UpstreamServerStatus;
  };
  return o.status;
}

/** The Ready condition (empty while there is none). */
export const readyOf = (s: UpstreamServerStatus | undefined): { status?: string; reason?: string; message?: string } =>
  s?.conditions?.find((c) => c.type === 'Ready') ?? {};
