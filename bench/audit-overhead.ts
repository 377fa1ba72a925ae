// Session-call throughput with and without audit records (issue 9): one operator, `c` clients each
// calling print(1) in its own session for a window, alternating phases with the audit writer on and
// off (off: the run service's writer is detached for the phase — a measurement seam, not a setting).
// Run: KUBECONFIG=... npx tsx bench/audit-overhead.ts [clients=8] [seconds=15] [rounds=2]
import { createNamespace, deleteNamespace, testKube } from '../test/e2e/helpers/kube.js';
import { startOperator } from '../test/e2e/helpers/operator.js';
import { executeCodeThroughput, openSessions } from './throughput.js';

const [clients = 8, seconds = 15, rounds = 2] = process.argv.slice(2).map(Number);
const k = testKube();
const ns = await createNamespace(k, 'bench-audit-overhead');
const op = await startOperator(ns, { CODEMODE_CPU_REQUEST: '10m', CODEMODE_MAX_SESSIONS: String(clients) });
const extras = (op.operator.runService as unknown as { extras: { audit?: unknown } }).extras;
const writer = extras.audit;
try {
  const sessions = await openSessions(op.url, clients);
  await executeCodeThroughput(op.url, clients, 2000, sessions); // warm-up
  for (let r = 0; r < rounds; r++) {
    for (const on of [true, false]) {
      extras.audit = on ? writer : undefined;
      const level = await executeCodeThroughput(op.url, clients, seconds * 1000, sessions);
      const cpu = process.cpuUsage();
      console.log(
        `audit ${on ? 'on ' : 'off'}: ${level.runsPerSecond} calls/s, median ${level.latencyMs.median} ms, p95 ${level.latencyMs.p95} ms, errors ${level.errors} (process CPU so far ${Math.round((cpu.user + cpu.system) / 1000)} ms)`,
      );
    }
  }
} finally {
  extras.audit = writer;
  await op.stop();
  await deleteNamespace(k, ns);
}
