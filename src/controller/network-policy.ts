// Makes sure the namespace's deny-all NetworkPolicy exists before any sandbox pod is created
// there. Checked once per namespace per process; recreated if someone deletes it (informer-free:
// a failed check simply happens again on the next run).
import type { Logger } from 'pino';
import { apiErrorMessage, isNotFound, statusOf, type KubeClients } from '../kube/clients.js';
import { buildSandboxNetworkPolicy } from '../sandbox/networkpolicy.js';

export class NetworkPolicyGuard {
  private readonly ensured = new Map<string, Promise<void>>();

  constructor(
    private readonly clients: KubeClients,
    private readonly log: Logger,
  ) {}

  ensure(namespace: string): Promise<void> {
    let p = this.ensured.get(namespace);
    if (!p) {
      p = this.ensureOnce(namespace).catch((err: unknown) => {
        this.ensured.delete(namespace);
        throw err;
      });
      this.ensured.set(namespace, p);
    }
    return p;
  }

  /** Forget what was checked (the policy may have been deleted): the next ensure() re-checks. */
  forget(namespace: string): void {
    this.ensured.delete(namespace);
  }

  private async ensureOnce(namespace: string): Promise<void> {
    const body = buildSandboxNetworkPolicy(namespace);
    const name = body.metadata?.name ?? '';
    try {
      await this.clients.networking.readNamespacedNetworkPolicy({ namespace, name });
      return;
    } catch (err) {
      if (!isNotFound(err)) throw new Error(`Failed to read NetworkPolicy ${namespace}/${name}: ${apiErrorMessage(err)}`, { cause: err });
    }
    try {
      await this.clients.networking.createNamespacedNetworkPolicy({ namespace, body });
      this.log.info({ namespace, networkpolicy: name }, 'Created NetworkPolicy');
    } catch (err) {
      if (statusOf(err) !== 409) throw new Error(`Failed to create NetworkPolicy ${namespace}/${name}: ${apiErrorMessage(err)}`, { cause: err });
    }
  }
}
