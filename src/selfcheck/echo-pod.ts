// The canary's counterpart: a small listener in the operator's namespace that is deliberately NOT
// a sandbox (no sandbox label, so the deny-all NetworkPolicy does not select it). It answers any
// client that sends it bytes. The canary must fail to exchange data with it, while a non-sandbox
// client (the operator, or the echo pod itself) succeeds — so a negative result means the policy
// blocked it, not that nobody was listening.
import type { V1Pod } from '@kubernetes/client-node';
import { LABEL_MANAGED_BY, MANAGED_BY_VALUE } from '../api/v1alpha1/index.js';
import { LABEL_SELFCHECK, SANDBOX_UID, hardenedSecurityContext, placementSpec, type SandboxPlacement } from '../sandbox/pod.js';

export const ECHO_PORT = 8080;
export const ECHO_CONTAINER = 'echo';
/** What the listener sends before echoing the first bytes it received. */
export const ECHO_GREETING = 'codemode-echo';

// Fixed program (no input reaches this command line). Replies only after it received data, so a
// bare TCP connect never counts as an exchange. Dual-stack when the pod has IPv6.
export const ECHO_PROGRAM = `
import socket, threading
def serve(c):
    try:
        c.settimeout(2)
        data = c.recv(64)
        if data:
            c.sendall(b"${ECHO_GREETING}\\n" + data)
    except OSError:
        pass
    finally:
        c.close()
try:
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.bind(("::", ${ECHO_PORT}))
except OSError:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", ${ECHO_PORT}))
s.listen(64)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
`;

/**
 * A client run INSIDE the echo pod against its own pod IP: the fallback proof that the listener
 * answers on that address when the operator runs outside the cluster and cannot reach pod IPs.
 * Prints `ok` or the error's name. The address is argv[1], written by the operator.
 */
export const ECHO_SELF_PROBE = `
import socket, sys
try:
    c = socket.create_connection((sys.argv[1], ${ECHO_PORT}), timeout=2)
    c.sendall(b"control\\n")
    print("ok" if c.recv(64).startswith(b"${ECHO_GREETING}") else "no-greeting")
except Exception as e:
    print(type(e).__name__)
`;

export interface EchoPodOptions extends SandboxPlacement {
  image: string;
  imagePullPolicy: 'Always' | 'IfNotPresent' | 'Never';
  activeDeadlineSeconds: number;
}

export function buildEchoPod(namespace: string, opts: EchoPodOptions): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      generateName: 'codemode-canary-echo-',
      namespace,
      // No sandbox label on purpose (see above).
      labels: { [LABEL_MANAGED_BY]: MANAGED_BY_VALUE, [LABEL_SELFCHECK]: 'echo' },
    },
    spec: {
      restartPolicy: 'Never',
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      terminationGracePeriodSeconds: 1,
      activeDeadlineSeconds: opts.activeDeadlineSeconds,
      ...placementSpec(opts),
      securityContext: { runAsUser: SANDBOX_UID, runAsGroup: SANDBOX_UID, runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [
        {
          name: ECHO_CONTAINER,
          image: opts.image,
          imagePullPolicy: opts.imagePullPolicy,
          command: ['python3', '-c', ECHO_PROGRAM],
          ports: [{ containerPort: ECHO_PORT, protocol: 'TCP' }],
          securityContext: hardenedSecurityContext(),
          resources: { requests: { cpu: '10m', memory: '32Mi' }, limits: { cpu: '200m', memory: '64Mi' } },
        },
      ],
    },
  };
}
