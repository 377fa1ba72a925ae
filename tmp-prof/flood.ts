import { Session } from 'node:inspector/promises';
import { writeFileSync } from 'node:fs';
import { startOperator, connect } from '../test/e2e/helpers/operator.js';
import { createNamespace, deleteNamespace, testKube } from '../test/e2e/helpers/kube.js';
const k = testKube();
const ns = await createNamespace(k, 'prof');
const op = await startOperator(ns);
try {
  const c = await connect(op.url, 'current');
  await c.callTool('execute_code', { code: 'print(1)' });
  const ins = new Session(); ins.connect(); await ins.post('Profiler.enable'); await ins.post('Profiler.start');
  for (const lang of [process.env.FLOOD_SESSION ? 'session' : 'cold']) {
    let args: Record<string, unknown> = { code: "import sys\nfor _ in range(2000): sys.stdout.write('x' * 65536)", timeout_seconds: 10 };
    if (lang === 'session') { const s = await c.callTool('create_session', { language: 'python' }); args = { ...args, session: s.structuredContent?.session }; }
    const cpu0 = process.cpuUsage(); const t0 = performance.now();
    const r = await c.callTool('execute_code', args);
    const cpu = process.cpuUsage(cpu0);
    console.log(lang, 'wall', (performance.now() - t0).toFixed(0), 'ms cpu', ((cpu.user + cpu.system) / 1000).toFixed(0), 'ms', JSON.stringify(r.structuredContent).slice(0, 200));
  }
  const { profile } = await ins.post('Profiler.stop'); writeFileSync('/tmp/flood.cpuprofile', JSON.stringify(profile));
  await c.close();
} finally { await op.stop(); await deleteNamespace(k, ns); }
