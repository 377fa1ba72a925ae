// Plots and rich outputs (issue 12) in the datascience profile (the data-science image), end to end through a real MCP
// client: a session computes with pandas and its Matplotlib figure comes back as `image` content
// (a PNG of the figure's pixel size, also saved in the session's workspace); a DataFrame as the
// last expression is a table; a warm transient run's figure comes back too, with only counts in
// its SandboxRun status; hostile display items (a non-PNG, an oversized image, forged frames)
// become notes while the session and the gateway keep working.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GROUP, SANDBOXPROFILE_PLURAL, SANDBOXRUN_PLURAL, VERSION, type SandboxRun } from '../../src/api/v1alpha1/index.js';
import { LABEL_SESSION } from '../../src/api/v1alpha1/labels.js';
import { runLabelValue } from '../../src/sandbox/names.js';
import { createNamespace, deleteNamespace, testKube, until } from './helpers/kube.js';
import { connect, type TestClient, type ToolResult } from './helpers/operator.js';
import { startOperator, type RunningOperator } from './helpers/start-operator.js';

const DATASCIENCE_IMAGE = 'codemode.local/datascience:v1';
const k = testKube();
let ns = '';
let op: RunningOperator;
let mcp: TestClient;

beforeAll(async () => {
  ns = await createNamespace(k, 'rich-outputs');
  // The datascience profile (as the chart ships it, with a pool of one) is the default here: every
  // session and run of this file uses it without naming it.
  await k.custom.createNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace: ns,
    plural: SANDBOXPROFILE_PLURAL,
    body: {
      apiVersion: `${GROUP}/${VERSION}`,
      kind: 'SandboxProfile',
      metadata: { name: 'datascience' },
      spec: { image: DATASCIENCE_IMAGE, warmPool: { min: 1, max: 1 }, preImport: ['numpy', 'pandas', 'matplotlib.pyplot'] },
    },
  });
  op = await startOperator(ns, { CODEMODE_DEFAULT_PROFILE: 'datascience', CODEMODE_WARM_POOL_SIZE: '0' });
  mcp = await connect(op.url, 'current');
}, 180_000);
afterAll(async () => {
  await mcp?.close();
  await op?.stop();
  await deleteNamespace(k, ns);
});

type Item = ToolResult['content'][number] & { data?: string; mimeType?: string };
const sc = (r: ToolResult): Record<string, unknown> => r.structuredContent ?? {};
const texts = (r: ToolResult): string => r.content.map((c) => c.text ?? '').join('\n');
const images = (r: ToolResult): Item[] => (r.content as Item[]).filter((c) => c.type === 'image');

/** Width and height from a PNG's IHDR chunk; throws when the bytes are not a PNG. */
function pngSize(png: Buffer): { width: number; height: number } {
  expect(png.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))).toBe(true);
  expect(png.toString('latin1', 12, 16)).toBe('IHDR');
  return { width: png.readUInt32BE(16), height: png.readUInt32BE(20) };
}

async function newSession(): Promise<string> {
  const r = await mcp.callTool('create_session', { language: 'python' });
  expect(r.isError ?? false, texts(r)).toBe(false);
  return String(sc(r).session);
}

const PLOT = `
import numpy as np, pandas as pd, matplotlib.pyplot as plt
df = pd.DataFrame({"x": np.arange(10), "y": np.arange(10) ** 2})
print("sum", int(df.y.sum()))
fig = plt.figure(figsize=(4, 3), dpi=100)
plt.plot(df.x, df.y)
`;

describe('plots and rich outputs on the data-science image', () => {
  let session = '';

  it('returns a session call’s Matplotlib figure as PNG image content and saves it in the workspace', async () => {
    session = await newSession();
    const r = await mcp.callTool('execute_code', { session, code: PLOT });
    expect(sc(r), texts(r)).toMatchObject({ phase: 'Succeeded', stdout: 'sum 285\n', display: { images: 1, items: 1 } });
    // The text comes first, then the image's label, then the image.
    expect(r.content[0]?.type).toBe('text');
    const [img] = images(r);
    expect(img?.mimeType).toBe('image/png');
    const png = Buffer.from(String(img?.data), 'base64');
    expect(pngSize(png)).toEqual({ width: 400, height: 300 });
    expect(texts(r)).toContain('saved as /workspace/figures/1.png');
    const saved = await mcp.callTool('read_file', { session, path: '/workspace/figures/1.png', encoding: 'base64' });
    expect(Buffer.from(String(sc(saved).content), 'base64').equals(png)).toBe(true);
    // plt.show() does not block and displays; a second figure is numbered on.
    const shown = await mcp.callTool('execute_code', { session, code: 'plt.figure(figsize=(2, 2), dpi=50); plt.plot([1, 2]); plt.show(); print("after")' });
    expect(sc(shown)).toMatchObject({ phase: 'Succeeded', stdout: 'after\n' });
    expect(pngSize(Buffer.from(String(images(shown)[0]?.data), 'base64'))).toEqual({ width: 100, height: 100 });
    expect(texts(shown)).toContain('/workspace/figures/2.png');
  });

  it('streams output as progress while a figure is drawn, and still returns the figure', async () => {
    const progress: string[] = [];
    const code = 'import time\nfor i in range(3):\n    print("step", i, flush=True)\n    plt.plot([i, i + 1])\n    time.sleep(0.4)';
    const r = await mcp.callTool('execute_code', { session, code }, (p) => progress.push(p.message ?? ''));
    expect(sc(r), texts(r)).toMatchObject({ phase: 'Succeeded', stdout: 'step 0\nstep 1\nstep 2\n', display: { images: 1 } });
    // At least one notification arrived before the end (the last may be coalesced with it).
    expect(progress.join('')).toContain('step 0');
    expect(images(r)).toHaveLength(1);
  });

  it('renders a DataFrame as the last expression as a compact table, and display() returns HTML and tables', async () => {
    const r = await mcp.callTool('execute_code', { session, code: 'big = pd.DataFrame({"n": range(100), "sq": [i * i for i in range(100)]})\nbig' });
    const table = String(sc(r).result);
    expect(table).toMatch(/^\s+n\s+sq\n0\s+0\s+0\n/);
    expect(table).toContain('[100 rows x 2 columns]');
    expect(table.split('\n').length).toBeLessThan(40);
    const d = await mcp.callTool('execute_code', { session, code: 'display("<b>hi</b>", mime="text/html"); display(df.head(2))' });
    expect(texts(d)).toContain('[HTML]\n<b>hi</b>');
    expect(texts(d)).toMatch(/\[table\]\n\s+x\s+y\n0\s+0\s+0\n1\s+1\s+1/);
    expect(images(d)).toHaveLength(0);
  });

  it('refuses hostile display items with notes and the session keeps working', async () => {
    const code = `
import os
d = os.environ["CODEMODE_DISPLAY_DIR"]
open(d + "/a.png", "wb").write(b"GIF89a" + b"0" * 100)
open(d + "/b.png", "wb").write(b"\\x89PNG\\r\\n\\x1a\\n" + b"0" * (3 * 1024 * 1024))
os.symlink("/etc/passwd", d + "/c.txt")
print("wrote")`;
    const r = await mcp.callTool('execute_code', { session, code });
    expect(sc(r), texts(r)).toMatchObject({ phase: 'Succeeded', stdout: 'wrote\n' });
    expect(images(r)).toHaveLength(0);
    expect(texts(r)).toContain('not a PNG');
    expect(texts(r)).toContain('over the cap of 2097152 bytes per image');
    expect(texts(r)).toContain('could not be read');
    // Frames forged by session code on the kernel's own stream: a GIF, a "PNG" that is not one,
    // and an image over the cap but within the frame bound. Notes, not a broken session.
    const forged = await mcp.callTool('execute_code', { session, code: FORGE });
    expect(sc(forged), texts(forged)).toMatchObject({ phase: 'Succeeded' });
    expect(images(forged)).toHaveLength(0);
    expect(texts(forged)).toContain('only PNG and JPEG images are returned');
    expect(texts(forged)).toContain('its data is not a PNG');
    expect(texts(forged)).toMatch(/An image of \d+ bytes was refused: over the cap/);
    expect(sc(await mcp.callTool('execute_code', { session, code: 'int(df.y.max())' }))).toMatchObject({ phase: 'Succeeded', result: '81' });
  });

  it('keeps only counts of a session call’s images in its audit record', async () => {
    let records: SandboxRun[] = [];
    await until(
      async () => {
        const list = (await op.clients.custom.listNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          namespace: ns,
          plural: SANDBOXRUN_PLURAL,
          labelSelector: `${LABEL_SESSION}=${runLabelValue(session)}`,
        })) as { items: SandboxRun[] };
        records = list.items;
        return records.some((r) => r.status?.images !== undefined);
      },
      60_000,
      'an audit record with status.images',
    );
    const withImages = records.find((r) => r.status?.images);
    expect(withImages?.status?.images).toMatchObject({ count: expect.any(Number), bytes: expect.any(Number) });
    // A record of several calls sums their images and lists each call's count.
    const perCall = withImages?.status?.calls?.map((c) => c.images ?? 0) ?? [withImages?.status?.images?.count ?? 0];
    expect(perCall.reduce((a, b) => a + b, 0)).toBe(withImages?.status?.images?.count);
    expect(perCall.some((n) => n === 1)).toBe(true);
    for (const r of records) expect(JSON.stringify(r)).not.toContain('iVBOR');
  });

  it('returns a warm transient run’s figure and keeps only counts in its SandboxRun status', async () => {
    // The profile's warm kernels imported its modules before the claim.
    const code = `import sys\nprint("preloaded", all(m in sys.modules for m in ("numpy", "pandas", "matplotlib.pyplot")))\n${PLOT}\nprint("ran")`;
    // A cold pod (the pool being refilled) returns the figure too, but imported nothing ahead: try
    // again until a warm pod served it.
    let r: ToolResult | undefined;
    await until(
      async () => {
        if (r !== undefined) await new Promise((resolve) => setTimeout(resolve, 3000));
        r = await mcp.callTool('execute_code', { code });
        expect(sc(r), texts(r)).toMatchObject({ phase: 'Succeeded' });
        expect(images(r).length, 'the figure, from a warm or a cold pod').toBe(1);
        return String(sc(r).stdout).startsWith('preloaded True');
      },
      240_000,
      'a warm run returning its figure',
    );
    const run = r as ToolResult;
    expect(String(sc(run).stdout)).toMatch(/^preloaded True\n/);
    expect(pngSize(Buffer.from(String(images(run)[0]?.data), 'base64'))).toEqual({ width: 400, height: 300 });
    expect(texts(run)).not.toContain('saved as');
    const name = String(sc(run).run);
    let stored: SandboxRun | undefined;
    await until(
      async () => {
        stored = (await op.clients.custom.getNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          namespace: ns,
          plural: SANDBOXRUN_PLURAL,
          name,
        })) as SandboxRun;
        return stored.status?.images !== undefined;
      },
      60_000,
      'status.images of the run',
    );
    expect(stored?.status?.images).toEqual({ count: 1, bytes: Buffer.from(String(images(run)[0]?.data), 'base64').length });
    expect(JSON.stringify(stored?.status)).not.toContain('iVBOR');
  }, 360_000);
});

/**
 * Python for session code: writes display frames for the running call into the streams the
 * kernel writes frames to (found through the garbage collector, as any code in its process can).
 */
const FORGE = `
import base64, gc, json, os
cid = max((o.call_id for o in gc.get_objects() if type(o).__name__ == 'CallOutput'), key=int)
def frame(obj):
    body = json.dumps(obj).encode()
    return b'%d\\n%s' % (len(body), body)
def blast(data):
    for c in gc.get_objects():
        if type(c).__name__ != 'Connection':
            continue
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(c.pipes[1] if c.pipes else c.sock.fileno(), view):]
        except OSError:
            pass
b64 = lambda b: base64.b64encode(b).decode()
blast(frame({"id": cid, "type": "display", "kind": "image", "mime": "image/gif", "data": b64(b"GIF89a0000")}))
blast(frame({"id": cid, "type": "display", "kind": "image", "mime": "image/png", "data": b64(b"not a png at all")}))
blast(frame({"id": cid, "type": "display", "kind": "image", "mime": "image/png", "data": b64(b"\\x89PNG\\r\\n\\x1a\\n" + b"0" * (2 * 1024 * 1024 + 100))}))
print("forged")
`;
