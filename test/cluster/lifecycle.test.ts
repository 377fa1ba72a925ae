// The cluster scripts' own contract: `up` on a running cluster is a no-op (unless kube-proxy's or
// kube-router's iptables rules went missing: then it restarts those two), `down` stops exactly
// what up started and cleans up after it, and `up` after `down` brings a working cluster back.
// Runs last (its own vitest project): it takes the cluster down for a moment.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createNamespace, deleteNamespace, execCapture, runPod, simplePod, testKube } from '../e2e/helpers/kube.js';

const clusterDir = join(process.env.CODEMODE_CACHE ?? join(homedir(), '.cache/codemode'), 'cluster');
const COMPONENTS = ['etcd', 'containerd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'kubelet', 'kube-proxy', 'kube-router'];

function script(name: string): { code: number; out: string } {
  const r = spawnSync('bash', [join('test/cluster', `${name}.sh`)], { encoding: 'utf8' });
  return { code: r.status ?? -1, out: `${r.stdout}${r.stderr}` };
}

function pids(): Record<string, number> {
  return Object.fromEntries(COMPONENTS.map((c) => [c, Number(readFileSync(join(clusterDir, 'pids', `${c}.pid`), 'utf8'))]));
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('cluster scripts', () => {
  it('up on a running cluster starts nothing', () => {
    const before = pids();
    const r = script('up');
    expect(r.code, r.out).toBe(0);
    expect(r.out).not.toMatch(/starting /);
    for (const c of COMPONENTS) expect(r.out).toContain(`${c} already running`);
    expect(pids()).toEqual(before);
  });

  it('up restarts kube-proxy and kube-router when their iptables rules went missing', () => {
    const before = pids();
    let r: ReturnType<typeof script> = { code: -1, out: '' };
    // kube-router puts the rule back by itself at its next sync, which any pod or policy event
    // starts (a fresh-clone run: namespaces of the suite before were still being deleted), and
    // then up rightly finds nothing missing: remove it again, at most three times.
    for (let attempt = 0; attempt < 3 && !r.out.includes('restarting both'); attempt++) {
      // Remove kube-router's jump into its pod firewall: NetworkPolicies would silently stop applying.
      const jump = execFileSync('iptables-save', ['-t', 'filter'], { encoding: 'utf8' })
        .split('\n')
        .find((l) => /^-A FORWARD .*-j KUBE-ROUTER-FORWARD$/.test(l));
      expect(jump).toBeDefined();
      execFileSync('bash', ['-c', `iptables ${(jump as string).replace(/^-A /, '-D ')}`]);
      r = script('up');
      expect(r.code, r.out).toBe(0);
    }
    expect(r.out).toContain('restarting both');
    const after = pids();
    for (const c of COMPONENTS) {
      if (c === 'kube-proxy' || c === 'kube-router') expect(after[c], c).not.toBe(before[c]);
      else expect(after[c], c).toBe(before[c]);
    }
    const rules = execFileSync('iptables-save', { encoding: 'utf8' });
    expect(rules).toMatch(/^-A FORWARD .*-j KUBE-ROUTER-FORWARD$/m);
    expect(rules).toContain('default/kubernetes:https');
  });

  it('down stops exactly what up started and removes its bridge and mounts; up brings it back', async () => {
    const before = pids();
    const down = script('down');
    expect(down.code, down.out).toBe(0);
    for (const [c, pid] of Object.entries(before)) expect(alive(pid), `${c} (pid ${pid}) still alive`).toBe(false);
    for (const c of COMPONENTS) expect(existsSync(join(clusterDir, 'pids', `${c}.pid`))).toBe(false);
    expect(script('status').code).not.toBe(0);
    expect(readFileSync('/proc/mounts', 'utf8')).not.toContain(`${clusterDir}/`);
    expect(spawnSync('ip', ['link', 'show', 'codemode0']).status).not.toBe(0);
    expect(execFileSync('iptables-save', { encoding: 'utf8' })).not.toMatch(/^:(KUBE-|CNI-)/m);

    const up = script('up');
    expect(up.code, up.out).toBe(0);
    expect(script('status').code).toBe(0);
    // Service portals and NetworkPolicy jumps are back (both daemons rewrite the filter table).
    const rules = execFileSync('iptables-save', { encoding: 'utf8' });
    expect(rules).toMatch(/^-A FORWARD .*-j KUBE-ROUTER-FORWARD$/m);
    expect(rules).toContain('default/kubernetes:https');
    const k = testKube();
    const ns = await createNamespace(k, 'lifecycle');
    try {
      await runPod(k, ns, simplePod('after-restart', ['sleep', 'infinity']));
      expect(await execCapture(k, ns, 'after-restart', ['echo', 'back'])).toMatchObject({ exitCode: 0, stdout: 'back\n' });
    } finally {
      await deleteNamespace(k, ns);
    }
  });
});
