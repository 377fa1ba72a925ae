// Helm and kubectl from the test cluster's cache (test/cluster builds both), run as child
// processes with the tests' KUBECONFIG.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { CONTAINERD_SOCK, builtTool } from '../../../scripts/cluster-paths.js';

const run = promisify(execFile);
export const HELM = process.env.HELM ?? builtTool('helm', 'helm') ?? 'helm';
export const KUBECTL = builtTool('kubernetes', 'kubectl') ?? 'kubectl';
export const CHART = 'charts/codemode-operator';

/** Runs a command; rejects with its stderr (and stdout) in the message when it fails. */
export async function sh(cmd: string, args: string[], input?: string): Promise<string> {
  const child = run(cmd, args, { env: process.env, maxBuffer: 32 * 1024 * 1024, timeout: 600_000 });
  if (input !== undefined) {
    child.child.stdin?.end(input);
  }
  try {
    return (await child).stdout;
  } catch (err) {
    const e = err as Error & { stderr?: string; stdout?: string };
    throw new Error(`${cmd.split('/').pop()} ${args.join(' ')} failed: ${e.stderr ?? ''}${e.stdout ?? ''}`, { cause: err });
  }
}

export const helm = (...args: string[]): Promise<string> => sh(HELM, args);
export const kubectl = (args: string[], input?: string): Promise<string> => sh(KUBECTL, args, input);
export const ctr = (...args: string[]): Promise<string> => sh('ctr', ['--address', CONTAINERD_SOCK, '-n', 'k8s.io', ...args]);
