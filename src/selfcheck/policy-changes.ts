// Tells the sandbox self-check when a NetworkPolicy other than the operator's own changes in the
// namespace. Policies add up: one that allows sandbox pods any traffic undoes the deny-all policy,
// and the gate (src/controller/network-policy.ts) watches only its own. The self-check's canary
// sees what the CNI actually enforces; without this it would look again only at its next period
// (10 min by default), while new sandboxes started with network.
import type { V1NetworkPolicy } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { KubeClients } from '../kube/clients.js';
import { ResilientInformer } from '../kube/informer.js';
import { SANDBOX_NETWORK_POLICY_NAME } from '../sandbox/networkpolicy.js';

export class PolicyChangeWatch {
  private readonly informer: ResilientInformer<V1NetworkPolicy>;
  private listed = false;

  constructor(clients: KubeClients, namespace: string, log: Logger, onChange: () => void) {
    this.informer = new ResilientInformer<V1NetworkPolicy>(
      clients.kc,
      `/apis/networking.k8s.io/v1/namespaces/${namespace}/networkpolicies`,
      (cont) => clients.networking.listNamespacedNetworkPolicy({ namespace, ...(cont && { _continue: cont }) }),
      log.child({ informer: 'networkpolicies-all' }),
    );
    // The first list is what the check at start sees anyway; the operator's own policy is the
    // gate's business.
    this.informer.onChange((p) => {
      if (this.listed && p.metadata?.name !== SANDBOX_NETWORK_POLICY_NAME) onChange();
    });
  }

  async start(): Promise<void> {
    await this.informer.start();
    this.listed = true;
  }

  stop(): Promise<void> {
    return this.informer.stop();
  }
}
