// Which pod is a session's: one it controls (an ownerReference with controller: true and the
// session's uid), set when the pod was created for it or claimed from the pool. The status's
// podName is only a record of it: whoever may write sandboxsessions/status could name another
// user's session pod there (that user's interpreter and /workspace would take this session's
// calls) or any pod for the controller to delete. So the controller and the gateway use a pod a
// status names only when the session controls it, and never delete one it does not.
import type { CoreV1Api, V1Pod } from '@kubernetes/client-node';
import { isNotFound } from '../kube/clients.js';

/** Whether `uid` (a session's) is the controller of `pod`. */
export function controls(uid: string | undefined, pod: V1Pod | undefined): boolean {
  return uid !== undefined && uid !== '' && (pod?.metadata?.ownerReferences ?? []).some((o) => o.controller === true && o.uid === uid);
}

/** What a pod name turned out to be for a session: its pod, no pod, or a pod that is not its own. */
export type SessionPod = { kind: 'own'; pod: V1Pod } | { kind: 'none' } | { kind: 'foreign'; pod: V1Pod };

/**
 * The pod a session may use, from its cached copy (undefined: not in the cache) and a read of it
 * from the API server (undefined: no such pod). A cache can lag behind the claim that made a pool
 * pod the session's (its cached version has no owner yet), so a pod the cache does not show as
 * the session's is read before it is called foreign.
 */
export async function sessionPod(uid: string | undefined, cached: V1Pod | undefined, read: () => Promise<V1Pod | undefined>): Promise<SessionPod> {
  if (controls(uid, cached)) return { kind: 'own', pod: cached as V1Pod };
  const live = await read();
  if (live === undefined) return { kind: 'none' };
  return controls(uid, live) ? { kind: 'own', pod: live } : { kind: 'foreign', pod: live };
}

/** A pod as the API server has it now; undefined when there is none. */
export async function readPod(core: Pick<CoreV1Api, 'readNamespacedPod'>, namespace: string, name: string): Promise<V1Pod | undefined> {
  try {
    return await core.readNamespacedPod({ namespace, name });
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/** Why a session cannot use the pod its status names. */
export const foreignPodMessage = (podName: string): string =>
  `its status names pod ${podName}, which this session does not own (only the gateway writes a session's status); nothing was run in it`;
