// File tools against a session whose own code races them: a background thread in the session's
// interpreter flips /workspace/race between a regular file and a symlink to /etc/passwd while
// read_file is called again and again. The old check-then-open script returned /etc/passwd now
// and then; the path must never lead outside /workspace.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNamespace, deleteNamespace, testKube } from './helpers/kube.js';
import { connect, startOperator, type RunningOperator, type TestClient, type ToolResult } from './helpers/operator.js';

const k = testKube();
let ns = '';
let op: RunningOperator;
let mcp: TestClient;
const READS = 150;

beforeAll(async () => {
  ns = await createNamespace(k, 'file-race');
  op = await startOperator(ns, { CODEMODE_WARM_POOL_SIZE: '1' });
  mcp = await connect(op.url, 'current');
});
afterAll(async () => {
  await mcp?.close();
  await op?.stop();
  await deleteNamespace(k, ns);
});

const sc = (r: ToolResult): Record<string, unknown> => r.structuredContent ?? {};

const FLIPPER = `
import os, threading
def flip():
    w = "/workspace"
    while True:
        try:
            os.symlink("/etc/passwd", w + "/race.tmp"); os.rename(w + "/race.tmp", w + "/race")
            with open(w + "/file.tmp", "w") as f: f.write("safe")
            os.rename(w + "/file.tmp", w + "/race")
        except OSError:
            pass
threading.Thread(target=flip, daemon=True).start()
"started"
`;

describe('file tools under a symlink race', () => {
  it('read_file never returns content from outside /workspace', async () => {
    const created = await mcp.callTool('create_session', { language: 'python' });
    const s = String(sc(created).session);
    expect(sc(await mcp.callTool('execute_code', { session: s, code: FLIPPER }))).toMatchObject({ phase: 'Succeeded' });
    let safe = 0;
    let refused = 0;
    for (let i = 0; i < READS; i++) {
      const r = await mcp.callTool('read_file', { session: s, path: 'race' });
      const text = JSON.stringify(r.content) + JSON.stringify(r.structuredContent ?? {});
      expect(text, `read ${i}`).not.toMatch(/root:x:0:0/);
      if (r.isError) refused++;
      else {
        expect(sc(r).content).toBe('safe');
        safe++;
      }
    }
    // The race really ran: reads met the link to /etc/passwd (and were refused). Under load every
    // read may meet it (safe stays 0; a fresh-clone run saw that), which proves no less.
    expect(refused).toBeGreaterThan(0);
    expect(safe + refused).toBe(READS);
    // And the tools still work normally next to it.
    expect(sc(await mcp.callTool('write_file', { session: s, path: 'ok/plain.txt', content: 'fine' }))).toMatchObject({ size: 4 });
    expect(sc(await mcp.callTool('read_file', { session: s, path: 'ok/plain.txt' }))).toMatchObject({ content: 'fine' });
  }, 600_000);
});
