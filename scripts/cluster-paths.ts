// Where the local test cluster (test/cluster) keeps its tools and state, for the TypeScript side
// (npm start, render:deploy, the bench, the tests): the same places and overrides as
// test/cluster/lib.sh — CODEMODE_CACHE (default ~/.cache/codemode) and CODEMODE_CLUSTER_DIR.
import { existsSync, readdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

export const CACHE_DIR = process.env.CODEMODE_CACHE ?? join(homedir(), '.cache/codemode');
export const CLUSTER_DIR = process.env.CODEMODE_CLUSTER_DIR ?? join(CACHE_DIR, 'cluster');
export const CLUSTER_KUBECONFIG = join(CLUSTER_DIR, 'kubeconfig');
export const CLUSTER_PKI = join(CLUSTER_DIR, 'pki');
export const CONTAINERD_SOCK = join(CLUSTER_DIR, 'run/containerd/containerd.sock');

/**
 * A tool the cluster scripts built: `name` in the newest `<prefix>-<version>` directory under
 * CACHE_DIR/bin (lib.sh names them, e.g. kubernetes-v1.34.9/kubectl, helm-v3.19.0/helm), or
 * undefined when none was built.
 */
export function builtTool(prefix: string, name: string): string | undefined {
  const bin = join(CACHE_DIR, 'bin');
  if (!existsSync(bin)) return undefined;
  const dirs = readdirSync(bin)
    .filter((d) => d.startsWith(`${prefix}-`))
    .sort()
    .reverse();
  for (const d of dirs) if (existsSync(join(bin, d, name))) return join(bin, d, name);
  return undefined;
}
