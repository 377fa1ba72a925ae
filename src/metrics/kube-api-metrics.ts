// The Kubernetes API requests of the process and how they ended (issue 10: the dashboard's "API
// errors"), counted where client-node sends them (src/kube/api-metrics.ts). Labels come from the
// closed sets declared there: an HTTP method (or CONNECT for exec) and a result mapped from the
// status — never a path, an object's name, a namespace or a message.
import { Counter, type Registry } from 'prom-client';
import { INFORMER_RESOURCES, KUBE_API_RESULTS, KUBE_API_VERBS, type KubeApiMetrics } from '../kube/api-metrics.js';

export function kubeApiMetrics(registry: Registry): KubeApiMetrics {
  const requests = new Counter({
    name: 'codemode_kube_api_requests_total',
    help: 'Kubernetes API requests of this process by verb (HTTP method; CONNECT for opening an exec stream) and result: success, or why it failed (invalid, unauthorized, forbidden, not_found, conflict, gone, too_large, throttled, server_error, network: no answer at all, other). not_found and conflict are often expected (reads of deleted objects, optimistic concurrency).',
    labelNames: ['verb', 'result'] as const,
    registers: [registry],
  });
  const restarts = new Counter({
    name: 'codemode_kube_informer_restarts_total',
    help: 'Informers (list + watch caches) that stopped on an error and were restarted, by resource.',
    labelNames: ['resource'] as const,
    registers: [registry],
  });
  // Every series exists from the start (at 0): an error rate or ratio then reads "none" as 0.
  for (const verb of KUBE_API_VERBS) for (const result of KUBE_API_RESULTS) if (verb !== 'other') requests.inc({ verb, result }, 0);
  for (const resource of INFORMER_RESOURCES) if (resource !== 'other') restarts.inc({ resource }, 0);
  return {
    request: (verb, result): void => void requests.inc({ verb, result }),
    informerRestarted: (resource): void => void restarts.inc({ resource }),
  };
}
