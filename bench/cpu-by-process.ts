// Where one execute_code's CPU goes on the node: every process's CPU time (/proc/<pid>/stat,
// user + system, plus what its reaped children used) and the node's busy time (/proc/stat),
// before and after N calls, divided by N. The gateway runs in a process of its own (as the
// bench's "as deployed" rows); the MCP client is this process. Short-lived processes (runc, a
// pod's container processes) are counted where they are reaped: a pod's processes in the
// containerd-shim, and the shim, once its pod is gone, in the node's init process.
// Usage: tsx bench/cpu-by-process.ts [refused|session|warm|cold] [calls]
//        tsx bench/cpu-by-process.ts attack '<attack name>' [attacks]
//   refused: execute_code with empty code, refused before any Kubernetes call (the MCP round trip)
//   session: print(1) in one python session; warm: print(1), pool of 2; cold: print(1), no pool
//   attack: one of the hostile row's attacks (bench/hostile.ts) N times (default 3), pool of 2,
//     while a benign client calls print(1) in its session: its latency, quiet and during them
// warm, cold and attack wait 5 s after the calls, so the runs' after-work (deletes, refills) is counted.
import { readFileSync, readdirSync } from 'node:fs';
import './env.js';
import { freePort, gatewayEnv, startGateway, stopGateway } from '../test/e2e/faults/helpers/gateway-process.js';
import { createNamespace, deleteNamespace, testKube } from '../test/e2e/helpers/kube.js';
import { connect } from '../test/e2e/helpers/operator.js';
import { summarize } from './stats.js';
import { chosenAttacks } from './hostile.js';
import { gatewayPid } from './gateway-pid.js';

const MODES = ['refused', 'session', 'warm', 'cold', 'attack'] as const;
type Mode = (typeof MODES)[number];
const TICK_MS = 10; // USER_HZ is 100 on Linux

/** CPU time (ms) by process name; the gateway and this process are told apart from other node processes. */
function cpuByProcess(gatewayPid: number | undefined): Map<string, number> {
  const byName = new Map<string, number>();
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue; // exited meanwhile
    }
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')).replace(/[/:].*$/, '');
    const name =
      Number(pid) === process.pid
        ? 'MCP client (this process)'
        : Number(pid) === gatewayPid
          ? 'gateway'
          : pid === '1'
            ? `${comm} (pid 1: exited shims, with their pods' processes)`
            : comm;
    const ticks = Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
    byName.set(name, (byName.get(name) ?? 0) + ticks * TICK_MS);
  }
  return byName;
}

/** The node's busy CPU time (ms): every mode of /proc/stat's cpu line but idle and iowait. */
function nodeBusyMs(): number {
  const v = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  return (v.reduce((a, b) => a + b, 0) - (v[3] ?? 0) - (v[4] ?? 0)) * TICK_MS;
}

async function main(): Promise<void> {
  const mode = (process.argv[2] ?? 'session') as Mode;
  if (!MODES.includes(mode)) throw new Error(`mode must be one of ${MODES.join(', ')}`);
  if (mode === 'attack') return attackMode(process.argv[3] ?? '', Number(process.argv[4] ?? 3));
  const n = Number(process.argv[3] ?? (mode === 'refused' || mode === 'session' ? 1000 : 10));
  const k = testKube();
  const ns = await createNamespace(k, 'bench-cpu');
  const pool = mode === 'warm' ? '2' : '0';
  const port = await freePort();
  const gateway = await startGateway(gatewayEnv(ns, { CODEMODE_WARM_POOL_MIN: pool, CODEMODE_WARM_POOL_MAX: pool }), port);
  try {
    const pid = gatewayPid(port);
    const client = await connect(gateway.url, 'current');
    let args: Record<string, unknown> = { code: mode === 'refused' ? '' : 'print(1)' };
    if (mode === 'session') {
      const r = await client.callTool('create_session', { language: 'python' });
      args = { ...args, session: r.structuredContent?.session };
    }
    const warmups = mode === 'refused' || mode === 'session' ? 300 : 2;
    for (let i = 0; i < warmups; i++) await client.callTool('execute_code', args);
    if (mode === 'warm' || mode === 'cold') await new Promise((r) => setTimeout(r, 5000));
    const before = cpuByProcess(pid);
    const busyBefore = nodeBusyMs();
    const started = performance.now();
    const latencies: number[] = [];
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      const r = await client.callTool('execute_code', args);
      latencies.push(performance.now() - t0);
      if (Boolean(r.isError) !== (mode === 'refused')) throw new Error(`call ${i}: ${JSON.stringify(r.content).slice(0, 300)}`);
    }
    const callsMs = performance.now() - started;
    if (mode === 'warm' || mode === 'cold') await new Promise((r) => setTimeout(r, 5000));
    const after = cpuByProcess(pid);
    const busy = nodeBusyMs() - busyBefore;
    await client.close();
    const lat = summarize(latencies);
    console.log(`${mode}: ${n} calls, median ${lat.median.toFixed(2)} ms, p95 ${lat.p95.toFixed(2)} ms, ${(callsMs / n).toFixed(2)} ms a call on average`);
    console.log(`node busy CPU: ${(busy / n).toFixed(2)} ms a call${mode === 'warm' || mode === 'cold' ? ' (with 5 s of after-work)' : ''}`);
    for (const row of cpuRows(before, after, n)) console.log(row);
  } finally {
    await stopGateway(gateway);
    await deleteNamespace(k, ns);
  }
}

/** Per-process CPU rows of `after` against `before`, divided by `n`, largest first (at least one tick in all). */
function cpuRows(before: Map<string, number>, after: Map<string, number>, n: number): string[] {
  return [...after]
    .map(([name, ms]) => [name, (ms - (before.get(name) ?? 0)) / n] as const)
    .filter(([, ms]) => ms * n >= TICK_MS)
    .sort((a, b) => b[1] - a[1])
    .map(([name, ms]) => `${ms.toFixed(2).padStart(9)} ms  ${name}`);
}

/** One attack `n` times in a row (each a new execute_code), a benign session client calling all along. */
async function attackMode(name: string, n: number): Promise<void> {
  const [attack] = chosenAttacks(name);
  if (!attack) throw new Error('name an attack (bench/hostile.ts)');
  const k = testKube();
  const ns = await createNamespace(k, 'bench-cpu');
  const port = await freePort();
  const gateway = await startGateway(gatewayEnv(ns, { CODEMODE_WARM_POOL_MIN: '2', CODEMODE_WARM_POOL_MAX: '2' }), port);
  try {
    const pid = gatewayPid(port);
    const benign = await connect(gateway.url, 'current');
    const hostile = await connect(gateway.url, 'current');
    const session = (await benign.callTool('create_session', { language: 'python' })).structuredContent?.session;
    const call = async (): Promise<number> => {
      const t0 = performance.now();
      await benign.callTool('execute_code', { session, code: 'print(1)' });
      return performance.now() - t0;
    };
    for (let i = 0; i < 100; i++) await call();
    const quiet: number[] = [];
    const quietUntil = performance.now() + 10_000;
    while (performance.now() < quietUntil) quiet.push(await call());
    let attacking = true;
    const loud: number[] = [];
    const loop = (async (): Promise<void> => {
      while (attacking) loud.push(await call());
    })();
    const before = cpuByProcess(pid);
    const busyBefore = nodeBusyMs();
    const durations: number[] = [];
    let hostileSession: unknown;
    for (let i = 0; i < n; i++) {
      if (attack.session) hostileSession ??= (await hostile.callTool('create_session', { language: 'python' })).structuredContent?.session;
      const t0 = performance.now();
      const r = await hostile.callTool('execute_code', {
        code: attack.code,
        language: attack.language,
        timeout_seconds: attack.timeout_seconds,
        ...(attack.session && { session: hostileSession }),
      });
      durations.push(performance.now() - t0);
      if (attack.session && r.structuredContent?.phase !== 'Succeeded') hostileSession = undefined;
      console.log(
        `attack ${i + 1}: ${Math.round(durations[i] ?? 0)} ms, ${String(r.structuredContent?.phase ?? 'no phase')} ${String(r.structuredContent?.reason ?? '')}`,
      );
    }
    await new Promise((r) => setTimeout(r, 5000));
    attacking = false;
    await loop;
    const after = cpuByProcess(pid);
    const busy = nodeBusyMs() - busyBefore;
    const q = summarize(quiet);
    const l = summarize(loud);
    console.log(`${attack.name}: ${n} attacks, median ${Math.round(summarize(durations).median)} ms each`);
    console.log(
      `benign quiet: n=${q.n} median ${q.median.toFixed(2)} p95 ${q.p95.toFixed(2)} ms; during the attacks and 5 s after: n=${l.n} median ${l.median.toFixed(2)} p95 ${l.p95.toFixed(2)} p99 ${l.p99.toFixed(2)} ms`,
    );
    console.log(`node busy CPU: ${(busy / n).toFixed(0)} ms an attack (with the benign calls and 5 s of after-work)`);
    for (const row of cpuRows(before, after, n)) console.log(row);
    await benign.close();
    await hostile.close();
  } finally {
    await stopGateway(gateway);
    await deleteNamespace(k, ns);
  }
}

await main();
