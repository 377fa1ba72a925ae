// The runner's network check programs (src/exec/runner.ts) in real pods under the sandbox
// NetworkPolicy on the real cluster: kube-router rejects the connect to the API server's Service
// with an ICMP port-unreachable, and the python and node checks see that refusal, not 0.3 s of
// silence. (bash's /dev/tcp connect, which blocks, sees it only on its SYN's retransmission a
// second later and passes on its timer; docs/performance.md, 2026-12-03 23:45.)
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LABEL_SANDBOX, SANDBOX_LABEL_VALUE } from '../../src/api/v1alpha1/index.js';
import { NETWORK_CHECK_EXIT, NETWORK_CHECK_JS, NETWORK_CHECK_PY } from '../../src/exec/runner.js';
import { buildSandboxNetworkPolicy } from '../../src/sandbox/networkpolicy.js';
import { createNamespace, deleteNamespace, execCapture, runPod, simplePod, testKube } from './helpers/kube.js';

const k = testKube();
let ns = '';
const labels = { [LABEL_SANDBOX]: SANDBOX_LABEL_VALUE };

beforeAll(async () => {
  ns = await createNamespace(k, 'netcheck');
  await k.networking.createNamespacedNetworkPolicy({ namespace: ns, body: buildSandboxNetworkPolicy(ns) });
  const node = simplePod('node', ['sleep', 'infinity'], labels);
  // The sandbox image has no node; the gateway's has (and sleep).
  node.spec!.containers[0]!.image = 'codemode.local/gateway:v1';
  await Promise.all([runPod(k, ns, simplePod('python', ['sleep', 'infinity'], labels)), runPod(k, ns, node)]);
}, 120_000);
afterAll(async () => {
  await deleteNamespace(k, ns);
});

/** The check as the runner runs it, against the Service address the pod was given. */
const command: Record<string, string> = {
  python: `python3 -I -S -c "$0" "$KUBERNETES_SERVICE_HOST" "$KUBERNETES_SERVICE_PORT"`,
  node: `node -e "$0" "$KUBERNETES_SERVICE_HOST" "$KUBERNETES_SERVICE_PORT"`,
};
const program: Record<string, string> = { python: NETWORK_CHECK_PY, node: NETWORK_CHECK_JS };

describe('the network check in a pod under the sandbox NetworkPolicy', () => {
  it.each(['python', 'node'])(
    '%s sees the connect refused, three times in a row',
    async (pod) => {
      for (let i = 0; i < 3; i++) {
        const r = await execCapture(k, ns, pod, ['sh', '-c', command[pod]!, program[pod]!]);
        expect({ exitCode: r.exitCode, stderr: r.stderr }).toEqual({ exitCode: NETWORK_CHECK_EXIT.refused, stderr: '' });
      }
    },
    90_000,
  );
});
