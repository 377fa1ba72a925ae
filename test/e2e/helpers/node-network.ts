// What the node does with a connection to a Service address, for failure reports: the route the
// kernel picks, kube-proxy's NAT rules for the address (with their packet counters: which rule
// connections took), kube-proxy's sync state and the connections conntrack holds to it (a
// connection it tracks unrewritten keeps its packets unrewritten, whatever the rules say later). Tests run as root on the node (test/cluster).
import { execFileSync } from 'node:child_process';

const run = (file: string, args: string[]): string => {
  try {
    return execFileSync(file, args, { encoding: 'utf8', timeout: 10_000, maxBuffer: 64 * 1024 * 1024, stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    return `(${file} ${args.join(' ')} failed: ${String(err).slice(0, 200)})`;
  }
};

/** The nat table's rules for `ip` and every KUBE- chain they lead to, counters included. */
export function natRulesFor(saved: string, ip: string): string[] {
  const rules = saved.split('\n').filter((l) => /^(\[\d+:\d+\] )?-A /.test(l));
  const chainOf = (l: string): string => l.replace(/^\[\d+:\d+\] /, '').split(' ')[1] ?? '';
  const targetOf = (l: string): string | undefined => / -j (KUBE-[A-Z0-9-]+)/.exec(l)?.[1];
  const picked = new Set(rules.filter((l) => l.includes(` -d ${ip}/32 `)));
  const chains = new Set<string>();
  for (let grew = true; grew;) {
    grew = false;
    for (const l of picked) {
      const t = targetOf(l);
      if (t && !['KUBE-MARK-MASQ', 'KUBE-MARK-DROP'].includes(t) && !chains.has(t)) {
        chains.add(t);
        for (const r of rules) if (chainOf(r) === t) picked.add(r);
        grew = true;
      }
    }
  }
  return [...picked];
}

/** A report of how this node routes connections to `ip` (a ClusterIP). */
export async function serviceRouting(ip: string): Promise<string> {
  const route = run('ip', ['-4', 'route', 'get', ip]).trim();
  const rules = natRulesFor(run('iptables-save', ['-c', '-t', 'nat']), ip);
  const metrics = await fetch('http://127.0.0.1:10249/metrics')
    .then(async (r) => (await r.text()).split('\n'))
    .catch((e: unknown) => [`(kube-proxy metrics unreadable: ${String(e).slice(0, 100)})`]);
  const sync = metrics.filter((l) => /^kubeproxy_(sync_proxy_rules_(last_timestamp|last_queued|[a-z_]*pending|iptables_last)|[a-z_]*fail)/.test(l));
  const tracked = conntrackSummary(run('conntrack', ['-L', '-p', 'tcp', '-d', ip]), ip);
  return [`route: ${route}`, `nat rules for ${ip} (${rules.length}):`, ...rules, 'kube-proxy:', ...sync, ...tracked].join('\n');
}

/** Connections conntrack tracks to `ip`, counted by state and by whether they were rewritten. */
export function conntrackSummary(listing: string, ip: string): string[] {
  const entries = listing.split('\n').filter((l) => l.includes(` dst=${ip} `));
  const counts = new Map<string, number>();
  const unrewritten: string[] = [];
  for (const e of entries) {
    const state = / (SYN_SENT|SYN_RECV|ESTABLISHED|FIN_WAIT|CLOSE_WAIT|LAST_ACK|TIME_WAIT|CLOSE|SYN_SENT2) /.exec(e)?.[1] ?? '?';
    // The reply tuple's source: the pod's address when kube-proxy rewrote the connection.
    const rewritten = [...e.matchAll(/ src=(\S+)/g)][1]?.[1] !== ip;
    const key = `${state} ${rewritten ? 'rewritten' : 'NOT rewritten'}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
    if (!rewritten) unrewritten.push(e);
  }
  return [`conntrack to ${ip}: ${entries.length} (${[...counts].map(([k, n]) => `${n} ${k}`).join(', ') || 'none'})`, ...unrewritten.slice(0, 20)];
}
