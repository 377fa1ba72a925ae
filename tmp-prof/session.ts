import { startOperator, connect } from '../test/e2e/helpers/operator.js';
import { createNamespace, deleteNamespace, testKube } from '../test/e2e/helpers/kube.js';
const k = testKube();
const ns = await createNamespace(k, 'prof');
const op = await startOperator(ns);
try {
  const c = await connect(op.url, 'current');
  const created = await c.callTool('create_session', { language: 'python' });
  const session = created.structuredContent?.session as string;
  const med = (a: number[]) => a.sort((x, y) => x - y)[Math.floor(a.length / 2)].toFixed(2);
  const time = async (n: number, f: () => Promise<unknown>) => { const s: number[] = []; for (let i = 0; i < n; i++) { const t = performance.now(); await f(); s.push(performance.now() - t); } return med(s); };
  for (let i = 0; i < 20; i++) await c.callTool('execute_code', { code: 'print(1)', session });
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'execute_code', arguments: { code: 'print(1)', session }, _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {}, 'io.modelcontextprotocol/clientInfo': { name: 'x', version: '1' } } } });
  const hdr = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 'execute_code' };
  const r = await fetch(op.url, { method: 'POST', headers: hdr, body }); console.log('raw status', r.status, (await r.text()).slice(0, 300));
  for (let round = 0; round < 3; round++) {
    console.log('sdk session', await time(100, () => c.callTool('execute_code', { code: 'print(1)', session })));
    console.log('raw fetch session', await time(100, async () => { const r = await fetch(op.url, { method: 'POST', headers: hdr, body }); await r.text(); }));
    console.log('sdk refused', await time(100, () => c.callTool('execute_code', { code: '', session })));
  }
  await c.close();
} finally { await op.stop(); await deleteNamespace(k, ns); }
