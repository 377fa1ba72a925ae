// When a new sandbox pod's container has started, from the kubelet's `Started` Event. The kubelet
// sends it right after starting the container and writes the pod's status (Running, Ready) only
// at its next relist, up to a second later; a cold run's kernel stream is opened on the Event,
// so the relay's exec and start overlap that wait and the NetworkPolicy's enforcement instead of
// following them. One field-selected watch per pod, ended by the first such Event, by `until`, or
// by any error. Nothing depends on it: without the Event (no RBAC to watch Events, a lost watch)
// the stream opens once the pod is Ready, as it would anyway.
import type { KubeConfig } from '@kubernetes/client-node';
import { Watch } from '@kubernetes/client-node/dist/watch.js';

interface StartedEvent {
  reason?: string;
  regarding?: { kind?: string; name?: string };
}

/** Whether `event` says the container of pod `pod` started (the field selector asks for no more). */
export function isStartedEventOf(event: unknown, pod: string): boolean {
  if (typeof event !== 'object' || event === null) return false;
  const e = event as StartedEvent;
  return e.reason === 'Started' && e.regarding?.kind === 'Pod' && e.regarding.name === pod;
}

/**
 * Resolves true once the kubelet reported the start of a container of `pod` (an Event that exists
 * already counts: a watch without a resourceVersion lists first), false when `until` settled
 * first or the watch could not be had or ended.
 */
export function whenContainerStarted(kc: KubeConfig, namespace: string, pod: string, until: Promise<unknown>): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    let request: { abort(): void } | undefined;
    let done = false;
    const finish = (started: boolean): void => {
      if (done) return;
      done = true;
      request?.abort();
      resolve(started);
    };
    void until.then(
      () => finish(false),
      () => finish(false),
    );
    new Watch(kc)
      .watch(
        `/apis/events.k8s.io/v1/namespaces/${namespace}/events`,
        { fieldSelector: `regarding.name=${pod},reason=Started`, allowWatchBookmarks: false },
        (type: string, obj: unknown) => {
          if (type === 'ADDED' && isStartedEventOf(obj, pod)) finish(true);
        },
        () => finish(false),
      )
      .then(
        (req: { abort(): void }) => {
          request = req;
          if (done) req.abort();
        },
        () => finish(false),
      );
  });
}
