// What the canary must fail to reach, computed from what the operator knows (pure). The canary
// adds what only the inside knows: the `kubernetes` Service from its environment and the
// nameservers of its resolv.conf (runtime/selfcheck/canary.py).
import { isIP } from 'node:net';
import { ECHO_PORT } from './echo-pod.js';

export interface CanaryTarget {
  name: 'api_server' | 'gateway' | 'pod_ip' | 'metadata';
  host: string;
  port: number;
  proto: 'tls' | 'http' | 'echo';
}

export interface TargetInputs {
  /** The API server URL the operator itself uses (kubeconfig or in-cluster). */
  apiServerUrl: string | undefined;
  /** The operator runs in a pod: its own address is then a target too. */
  inCluster: boolean;
  /** The operator's non-loopback IPs (its pod IP in a cluster). */
  ownAddresses: readonly string[];
  bindAddress: string;
  port: number;
  /** The echo pod's IP. */
  echoIp: string;
}

/** The cloud metadata endpoint (AWS, GCP, Azure, OpenStack all answer HTTP here). */
export const METADATA_ADDRESS = '169.254.169.254';

function isLoopback(ip: string): boolean {
  return ip.startsWith('127.') || ip === '::1';
}

function bare(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

function apiServer(url: string | undefined): CanaryTarget[] {
  if (!url) return [];
  try {
    const u = new URL(url);
    const host = bare(u.hostname);
    // A name would need DNS inside the sandbox, which is denied, and a loopback address is the
    // canary itself: only other addresses are meaningful.
    if (isIP(host) === 0 || isLoopback(host)) return [];
    return [{ name: 'api_server', host, port: Number(u.port || (u.protocol === 'http:' ? 80 : 443)), proto: u.protocol === 'http:' ? 'http' : 'tls' }];
  } catch {
    return [];
  }
}

/** Where the gateway can be reached from other pods, or why there is nothing to probe. */
export function gatewayAddresses(i: Pick<TargetInputs, 'inCluster' | 'ownAddresses' | 'bindAddress' | 'port'>): { hosts: string[]; skipped?: string } {
  if (!i.inCluster) return { hosts: [], skipped: 'the gateway runs outside the cluster' };
  if (i.port === 0) return { hosts: [], skipped: 'the gateway port is chosen at start (CODEMODE_PORT=0)' };
  const bind = bare(i.bindAddress);
  if (bind === '0.0.0.0' || bind === '::')
    return i.ownAddresses.length > 0 ? { hosts: [...i.ownAddresses] } : { hosts: [], skipped: 'the gateway has no non-loopback address' };
  if (isIP(bind) !== 0 && !isLoopback(bind)) return { hosts: [bind] };
  return { hosts: [], skipped: `the gateway listens on ${i.bindAddress} only` };
}

export function canaryTargets(i: TargetInputs): { targets: CanaryTarget[]; gatewaySkipped?: string } {
  const gw = gatewayAddresses(i);
  const targets: CanaryTarget[] = [
    ...apiServer(i.apiServerUrl),
    ...gw.hosts.map((host): CanaryTarget => ({ name: 'gateway', host, port: i.port, proto: 'http' })),
    { name: 'pod_ip', host: bare(i.echoIp), port: ECHO_PORT, proto: 'echo' },
    { name: 'metadata', host: METADATA_ADDRESS, port: 80, proto: 'http' },
  ];
  return { targets, ...(gw.skipped !== undefined && { gatewaySkipped: gw.skipped }) };
}
