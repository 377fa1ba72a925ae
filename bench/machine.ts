// What the figures were measured on: they mean little without the machine and the cluster.
import { arch, cpus, loadavg, release, totalmem } from 'node:os';
import { VersionApi } from '@kubernetes/client-node';
import type { TestKube } from '../test/e2e/helpers/kube.js';

export interface MachineInfo {
  cpus: number;
  cpuModel: string;
  memoryBytes: number;
  arch: string;
  kernel: string;
  node: string;
  kubernetes: { server: string; kubelet: string[]; containerRuntime: string[]; nodes: number };
  /** 1/5/15-minute load averages when the bench started (others may share the machine). */
  loadAverageAtStart: number[];
}

export async function machineInfo(k: TestKube): Promise<MachineInfo> {
  const version = await k.kc.makeApiClient(VersionApi).getCode();
  const nodes = await k.core.listNode();
  return {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? 'unknown',
    memoryBytes: totalmem(),
    arch: arch(),
    kernel: release(),
    node: process.version,
    kubernetes: {
      server: version.gitVersion,
      kubelet: nodes.items.map((n) => n.status?.nodeInfo?.kubeletVersion ?? ''),
      containerRuntime: nodes.items.map((n) => n.status?.nodeInfo?.containerRuntimeVersion ?? ''),
      nodes: nodes.items.length,
    },
    loadAverageAtStart: loadavg().map((l) => Math.round(l * 100) / 100),
  };
}

export function describeMachine(m: MachineInfo): string {
  return `${m.cpus} × ${m.cpuModel}, ${(m.memoryBytes / 2 ** 30).toFixed(1)} GiB, Node ${m.node}, Kubernetes ${m.kubernetes.server} (${m.kubernetes.nodes} node, ${m.kubernetes.containerRuntime.join(', ')}), load ${m.loadAverageAtStart.join(' ')}`;
}
