// Waits for sandbox pods to become ready, fed by the pod informer (a watch), never by polling.
import type { V1Pod } from '@kubernetes/client-node';
import type { ResilientInformer } from '../kube/informer.js';
import { podState, type PodState } from './pod-state.js';

interface Waiter {
  check: (pod: V1Pod | undefined) => boolean;
}

export class PodWatcher {
  private readonly waiters = new Map<string, Set<Waiter>>();

  constructor(private readonly informer: ResilientInformer<V1Pod>) {
    informer.onChange((pod) => this.notify(pod));
  }

  get(namespace: string, name: string): V1Pod | undefined {
    return this.informer.get(name, namespace);
  }

  /**
   * Resolves with the pod's state once it is ready or has failed; after `timeoutMs`, with the
   * last pending state. `signal` stops the wait early (pending).
   */
  waitReady(namespace: string, name: string, timeoutMs: number): Promise<PodState> {
    const key = `${namespace}/${name}`;
    return new Promise<PodState>((resolve) => {
      let last: PodState = { kind: 'pending', message: 'Pod is being created.' };
      const finish = (s: PodState): void => {
        clearTimeout(timer);
        this.waiters.get(key)?.delete(waiter);
        resolve(s);
      };
      const waiter: Waiter = {
        check: (pod) => {
          if (!pod) return false;
          last = podState(pod);
          if (last.kind === 'pending') return false;
          finish(last);
          return true;
        },
      };
      const timer = setTimeout(() => finish(last), timeoutMs);
      if (waiter.check(this.get(namespace, name))) return;
      let set = this.waiters.get(key);
      if (!set) this.waiters.set(key, (set = new Set()));
      set.add(waiter);
    });
  }

  /**
   * Resolves with the pod (undefined once it is gone) as soon as `done` holds for it, or after
   * `timeoutMs` with whatever is known then.
   */
  waitFor(namespace: string, name: string, done: (pod: V1Pod | undefined) => boolean, timeoutMs: number): Promise<V1Pod | undefined> {
    const key = `${namespace}/${name}`;
    return new Promise((resolve) => {
      const finish = (): void => {
        clearTimeout(timer);
        this.waiters.get(key)?.delete(waiter);
        resolve(this.get(namespace, name));
      };
      const waiter: Waiter = {
        check: (pod) => {
          if (!done(pod)) return false;
          finish();
          return true;
        },
      };
      const timer = setTimeout(finish, timeoutMs);
      if (waiter.check(this.get(namespace, name))) return;
      let set = this.waiters.get(key);
      if (!set) this.waiters.set(key, (set = new Set()));
      set.add(waiter);
    });
  }

  private notify(pod: V1Pod): void {
    const key = `${pod.metadata?.namespace}/${pod.metadata?.name}`;
    const set = this.waiters.get(key);
    if (!set) return;
    for (const w of [...set]) w.check(pod);
    if (set.size === 0) this.waiters.delete(key);
  }
}
