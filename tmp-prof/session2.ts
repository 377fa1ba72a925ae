import { Session } from 'node:inspector/promises';
import { writeFileSync } from 'node:fs';
import { startOperator, connect } from '../test/e2e/helpers/operator.js';
import { createNamespace, deleteNamespace, testKube } from '../test/e2e/helpers/kube.js';
const k = testKube();
const ns = await createNamespace(k, 'prof');
const op = await startOperator(ns);
try {
  const c = await connect(op.url, 'current');
  const created = await c.callTool('create_session', { language: 'python' });
  const session = created.structuredContent?.session as string;
  for (let i = 0; i < 20; i++) await c.callTool('execute_code', { code: 'print(1)', session });
  const ins = new Session(); ins.connect(); await ins.post('Profiler.enable'); await ins.post('Profiler.setSamplingInterval', { interval: 100 }); await ins.post('Profiler.start');
  const cpu0 = process.cpuUsage(); const t0 = performance.now();
  const N = 300;
  for (let i = 0; i < N; i++) await c.callTool('execute_code', { code: 'print(1)', session });
  const cpu = process.cpuUsage(cpu0); const wall = performance.now() - t0;
  const { profile } = await ins.post('Profiler.stop'); writeFileSync('/tmp/loop.cpuprofile', JSON.stringify(profile));
  console.log(`per call: wall ${(wall / N).toFixed(2)} ms, cpu user ${(cpu.user / 1000 / N).toFixed(2)} ms sys ${(cpu.system / 1000 / N).toFixed(2)} ms`);
  await c.close();
} finally { await op.stop(); await deleteNamespace(k, ns); }
