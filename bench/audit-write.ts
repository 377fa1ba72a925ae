// What one audit record per session call costs (issue 9): feeds the real AuditWriter at fixed call
// rates against the test cluster and reports how fast records reach the API server, the backlog,
// the gateway CPU per record, the time record() takes on the call's path and the stored size.
// Run: KUBECONFIG=... npx tsx bench/audit-write.ts [rate:seconds ...]   (default 20:10 100:10 300:5)
import { pino } from 'pino';
import { GROUP, SANDBOXRUN_PLURAL, VERSION } from '../src/api/v1alpha1/index.js';
import { auditEntry, auditRunBody, auditStatus } from '../src/audit/record.js';
import { AuditWriter } from '../src/audit/writer.js';
import { makeClients } from '../src/kube/clients.js';
import { generateRunName } from '../src/sandbox/names.js';
import { createNamespace, deleteNamespace, testKube } from '../test/e2e/helpers/kube.js';

const k = testKube();
const clients = makeClients(k.kc);
const CODE = 'import math\nresult = sum(math.sqrt(i) for i in range(1000))\nprint(result)\n';

function entry(ns: string) {
  const now = Date.now();
  return auditEntry({
    name: generateRunName(),
    namespace: ns,
    session: 'session-bench',
    owner: { user: 'bench-user', groups: ['team'] },
    language: 'python',
    timeoutSeconds: 30,
    code: CODE,
    startedMs: now - 5,
    endedMs: now,
    outcome: { phase: 'Succeeded', truncated: false, stdoutBytes: 18, stderrBytes: 0, durationMs: 5 },
  });
}

async function phase(ns: string, rate: number, seconds: number): Promise<string> {
  let written = 0;
  let dropped = 0;
  let maxQueue = 0;
  const writer = new AuditWriter(
    clients,
    {
      capacity: 100_000,
      concurrency: Number(process.env.AUDIT_CONCURRENCY ?? 4),
      onResult: (r) => (r === 'written' ? written++ : dropped++),
      onQueue: (n) => (maxQueue = Math.max(maxQueue, n)),
    },
    pino({ level: 'silent' }),
  );
  const total = rate * seconds;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let sent = 0;
  let recordMs = 0;
  await new Promise<void>((resolve) => {
    const tick = setInterval(() => {
      const due = Math.min(total, Math.floor(((performance.now() - t0) / 1000) * rate));
      for (; sent < due; sent++) {
        const e = entry(ns);
        const s = performance.now();
        writer.record(e);
        recordMs += performance.now() - s;
      }
      if (sent >= total) {
        clearInterval(tick);
        resolve();
      }
    }, 10);
  });
  const fedS = (performance.now() - t0) / 1000;
  while (written + dropped < total) await new Promise((r) => setTimeout(r, 50));
  const doneS = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  await writer.stop(1000);
  return [
    `rate ${rate}/s for ${seconds} s: ${written} written, ${dropped} dropped`,
    `  fed in ${fedS.toFixed(1)} s, all written after ${doneS.toFixed(1)} s (${(written / doneS).toFixed(0)} records/s), largest backlog ${maxQueue}`,
    `  gateway CPU ${((cpu.user + cpu.system) / 1000 / written).toFixed(2)} ms per record; record() on the call path ${((recordMs / total) * 1000).toFixed(1)} µs per call`,
  ].join('\n');
}

async function main(): Promise<void> {
  const phases = (process.argv.slice(2).length > 0 ? process.argv.slice(2) : ['20:10', '100:10', '300:5']).map(
    (p) => p.split(':').map(Number) as [number, number],
  );
  const ns = await createNamespace(k, 'bench-audit');
  try {
    const e = entry(ns);
    const bytes = Buffer.byteLength(JSON.stringify({ ...(auditRunBody(e, 3600) as object), status: auditStatus(e) }));
    console.log(`record: ${bytes} bytes of JSON before the API server's metadata (code ${CODE.length} bytes)`);
    for (const [rate, seconds] of phases) console.log(await phase(ns, rate, seconds));
    const list = (await k.custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: SANDBOXRUN_PLURAL, limit: 1 })) as {
      items: unknown[];
    };
    console.log(`stored object (as served): ${Buffer.byteLength(JSON.stringify(list.items[0]))} bytes`);
  } finally {
    await deleteNamespace(k, ns);
  }
}

await main();
