// The cluster scripts' own contract: `up` on a running cluster is a no-op (unless kube-proxy's or
// kube-router's iptables rules went missing: then it restarts those two, or etcd's database is
// mostly free pages: then it defragments it), `down` stops exactly
// what up started and cleans up after it, and `up` after `down` brings a working cluster back.
// Runs last (its own vitest project): it takes the cluster down for a moment.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLUSTER_DIR } from '../../scripts/cluster-paths.js';
import { createNamespace, deleteNamespace, execCapture, runPod, simplePod, testKube } from '../e2e/helpers/kube.js';

const clusterDir = CLUSTER_DIR;
const COMPONENTS = ['etcd', 'containerd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'kubelet', 'kube-proxy', 'kube-router'];

function script(name: string, env: Record<string, string> = {}): { code: number; out: string } {
  const r = spawnSync('bash', [join('test/cluster', `${name}.sh`)], { encoding: 'utf8', env: { ...process.env, ...env } });
  return { code: r.status ?? -1, out: `${r.stdout}${r.stderr}` };
}

function pids(): Record<string, number> {
  return Object.fromEntries(COMPONENTS.map((c) => [c, Number(readFileSync(join(clusterDir, 'pids', `${c}.pid`), 'utf8'))]));
}

const ETCD = 'http://127.0.0.1:23790';

/** etcd's v3 JSON gateway (the API server's own etcd, on the loopback address only). */
async function etcd(path: string, body: object = {}): Promise<Record<string, unknown>> {
  const res = await fetch(`${ETCD}${path}`, { method: 'POST', body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`etcd ${path}: HTTP ${res.status} ${await res.text()}`);
  return (await res.json()) as Record<string, unknown>;
}

async function etcdSizes(): Promise<{ size: number; used: number; revision: number }> {
  const s = await etcd('/v3/maintenance/status');
  return { size: Number(s.dbSize), used: Number(s.dbSizeInUse), revision: Number((s.header as { revision: string }).revision) };
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

  it('up defragments etcd when most of its database is free pages, and only then', async () => {
    // Make free pages: ConfigMaps written and deleted, their revisions compacted away (the API
    // server would do that itself within 5 minutes). At least 40 MB, and more than the database
    // already holds: a long-lived cluster (a day of bench runs) can hold 50 MB of live data, and
    // the free pages must outweigh it.
    const k = testKube();
    const ns = await createNamespace(k, 'etcd-defrag');
    const value = 'x'.repeat(1_000_000);
    const fillers = Math.max(40, Math.ceil((await etcdSizes()).used / 1_000_000) + 16);
    try {
      for (let i = 0; i < fillers; i++)
        await k.core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: `filler-${i}` }, data: { v: value } } });
      await k.core.deleteCollectionNamespacedConfigMap({ namespace: ns });
    } finally {
      await deleteNamespace(k, ns);
    }
    await etcd('/v3/kv/compaction', { revision: String((await etcdSizes()).revision), physical: true });
    const fragmented = await etcdSizes();
    expect(fragmented.used * 2, JSON.stringify(fragmented)).toBeLessThan(fragmented.size);

    // Above the size threshold: defragmented, and nothing restarted.
    const before = pids();
    const big = script('up', { CODEMODE_ETCD_DEFRAG_MIN_BYTES: String(fragmented.size + 1) });
    expect(big.code, big.out).toBe(0);
    expect(big.out).not.toContain('defragmenting');
    expect((await etcdSizes()).size).toBe(fragmented.size);
    const r = script('up', { CODEMODE_ETCD_DEFRAG_MIN_BYTES: '1048576' });
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain('defragmenting');
    expect(pids()).toEqual(before);
    const after = await etcdSizes();
    expect(after.size, JSON.stringify({ fragmented, after })).toBeLessThan(fragmented.size / 2);
    // The API server goes on serving from the defragmented database.
    await expect(k.core.readNamespace({ name: 'default' })).resolves.toMatchObject({ metadata: { name: 'default' } });
  });

  it('down stops exactly what up started and removes its bridges and mounts; up brings them back', async () => {
    const before = pids();
    const down = script('down');
    expect(down.code, down.out).toBe(0);
    for (const [c, pid] of Object.entries(before)) expect(alive(pid), `${c} (pid ${pid}) still alive`).toBe(false);
    for (const c of COMPONENTS) expect(existsSync(join(clusterDir, 'pids', `${c}.pid`))).toBe(false);
    expect(script('status').code).not.toBe(0);
    expect(readFileSync('/proc/mounts', 'utf8')).not.toContain(`${clusterDir}/`);
    for (const link of ['codemode0', 'codemode-svc0']) expect(spawnSync('ip', ['link', 'show', link]).status, link).not.toBe(0);
    expect(execFileSync('iptables-save', { encoding: 'utf8' })).not.toMatch(/^:(KUBE-|CNI-)/m);

    const up = script('up');
    expect(up.code, up.out).toBe(0);
    expect(script('status').code).toBe(0);
    expect(execFileSync('ip', ['-4', 'route', 'show', '10.96.0.0/16'], { encoding: 'utf8' })).toContain('dev codemode-svc0');
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
