// Rich outputs in the python kernel (runtime/python/codemode_kernel/display.py and the SDK's
// codemode.display): what a call's code displays comes back as `display` frames before its
// result, checked and capped in the kernel; hostile files in the display directory become notes.
// Matplotlib and pandas are not on the test machine: the e2e (rich-outputs) covers them.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startSession } from './harness.js';

type Session = Awaited<ReturnType<typeof startSession>>;
const PNG = 'b"\\x89PNG\\r\\n\\x1a\\n" + bytes(range(24))';

describe('display items in the python kernel', () => {
  let session: Session | undefined;
  afterEach(async () => {
    await session?.stop();
    session = undefined;
  });

  it('returns display() images, HTML and text in order, and saves a session’s images in its figures', async () => {
    session = await startSession('python');
    const { frame, displays } = await session.client.exec(`display(${PNG})\ndisplay("<b>x</b>", mime="text/html")\ndisplay([1, 2])\nprint("ok")`);
    expect(frame).toMatchObject({ status: 'ok', stdout: 'ok\n' });
    expect(displays.map((d) => [d.kind, d.mime ?? d.format])).toEqual([
      ['image', 'image/png'],
      ['text', 'html'],
      ['text', 'text'],
    ]);
    const png = Buffer.from(String(displays[0]?.data), 'base64');
    expect(png.subarray(0, 4).toString('latin1')).toBe('\x89PNG');
    expect(displays[0]?.path).toBe(join(session.kernel.figuresDir, '1.png'));
    expect(readFileSync(join(session.kernel.figuresDir, '1.png')).equals(png)).toBe(true);
    expect(displays[2]?.text).toBe('[1, 2]');
    // The next call starts empty: nothing is displayed twice.
    expect((await session.client.exec('1')).displays).toEqual([]);
  });

  // Numbered on from what the figures directory holds, whatever else it holds.
  it.each([
    ['nothing', '', '1.png'],
    ['2.png and notes.txt', 'open(f + "/2.png", "wb").close()\nopen(f + "/notes.txt", "w").close()', '3.png'],
    ['a file named with a superscript digit', 'open(f + "/\u00b2.png", "wb").close()', '1.png'],
    // The gateway takes a path of at most 9 digits: a longer number would refuse every image after.
    ['a file named by a timestamp in ms', 'open(f + "/1733456789012.png", "wb").close()', '1.png'],
    ['the last number the gateway takes', 'open(f + "/999999999.png", "wb").close()', undefined],
  ])('saves an image after a figures directory holding %s', async (_name, write, saved) => {
    session = await startSession('python');
    const f = JSON.stringify(session.kernel.figuresDir);
    const { frame, displays } = await session.client.exec(`import os\nf = ${f}\nos.makedirs(f, exist_ok=True)\n${write}\ndisplay(${PNG})`);
    expect(frame).toMatchObject({ status: 'ok' });
    expect(displays).toEqual([expect.objectContaining({ kind: 'image' })]);
    expect(displays[0]?.path).toBe(saved && join(session.kernel.figuresDir, saved));
  });

  it.each([
    ['a GIF named .png', 'open(d + "/a.png", "wb").write(b"GIF89a")', 'not a PNG'],
    ['an image over the cap', 'open(d + "/a.png", "wb").write(b"\\x89PNG\\r\\n\\x1a\\n" + bytes(200))', 'over the cap of 100 bytes per image'],
    ['a link', 'os.symlink("/etc/passwd", d + "/a.txt")', 'could not be read'],
    ['a fifo', 'os.mkfifo(d + "/a.html")', 'not a regular file'],
    ['an unknown type', 'open(d + "/a.exe", "wb").write(b"x")', "unknown type '.exe'"],
  ])('refuses %s with a note', async (_what, write, note) => {
    session = await startSession('python');
    const code = `import os\nd = os.environ["CODEMODE_DISPLAY_DIR"]\n${write}`;
    const { frame, displays } = await session.client.request({ op: 'exec', code, timeoutMs: 10_000, displayMaxImageBytes: 100 });
    expect(frame).toMatchObject({ status: 'ok' });
    expect(displays).toEqual([expect.objectContaining({ kind: 'text', format: 'note', text: expect.stringContaining(note) })]);
  });

  it('caps the count per call with one note for the rest, and cuts texts to the call’s cap', async () => {
    session = await startSession('python');
    const code = `for i in range(5): display("x" * 50)`;
    const { displays } = await session.client.request({ op: 'exec', code, timeoutMs: 10_000, capChars: 10, displayMaxItems: 2 });
    expect(displays.map((d) => d.text)).toEqual([
      'x'.repeat(10),
      'a display text was not returned: the texts one call displays share the cap of 10 characters',
      '3 more display item(s) were not returned: at most 2 per call',
    ]);
  });

  it('lets the texts of one call share its cap: the second is cut to what the first left', async () => {
    session = await startSession('python');
    const code = `display("a" * 6)\ndisplay("<b>" + "é" * 20, mime="text/html")\ndisplay("c")`;
    const { displays } = await session.client.request({ op: 'exec', code, timeoutMs: 10_000, capChars: 10 });
    expect(displays.map((d) => d.text)).toEqual(['a'.repeat(6), '<b>é', expect.stringContaining('share the cap of 10 characters')]);
  });

  it('returns a one-shot run’s images (from its own process), unsaved', async () => {
    session = await startSession('python', ['--prestart']);
    const { frame, displays } = await session.client.run('python', `from codemode import display\ndisplay(${PNG})`);
    expect(frame).toMatchObject({ status: 'ok', exitCode: 0 });
    expect(displays).toEqual([expect.objectContaining({ kind: 'image', mime: 'image/png' })]);
    expect(displays[0]?.path).toBeUndefined();
    expect(existsSync(session.kernel.figuresDir)).toBe(false);
  });

  it('selects the codemode Matplotlib backend for the code it runs', async () => {
    session = await startSession('python');
    const { frame } = await session.client.exec('import os\nos.environ["MPLBACKEND"]');
    expect(frame.result).toBe("'module://codemode.mpl_backend'");
  });
});

describe('display items in the node kernel', () => {
  let session: Session | undefined;
  afterEach(async () => {
    await session?.stop();
    session = undefined;
  });

  it('returns display() images and tables, saves images, and refuses a non-PNG with a note', async () => {
    session = await startSession('node');
    const code = `
const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3]);
display(png);
require('codemode').display([{ a: 1, b: 'x' }, { a: 22, b: 'yy' }]);
display('<i>i</i>', { mime: 'text/html' });
require('fs').writeFileSync(process.env.CODEMODE_DISPLAY_DIR + '/z.png', 'GIF89a');
1`;
    const { frame, displays } = await session.client.exec(code);
    expect(frame).toMatchObject({ status: 'ok', result: '1' });
    expect(displays).toEqual([
      expect.objectContaining({ kind: 'image', mime: 'image/png', path: join(session.kernel.figuresDir, '1.png') }),
      expect.objectContaining({ kind: 'text', format: 'table', text: ' a   b\n 1   x\n22  yy' }),
      expect.objectContaining({ kind: 'text', format: 'html', text: '<i>i</i>' }),
      expect.objectContaining({ kind: 'text', format: 'note', text: expect.stringContaining('not a PNG') }),
    ]);
    expect(readFileSync(join(session.kernel.figuresDir, '1.png')).length).toBe(11);
  });

  // Numbered on only from names the gateway takes (1 to 9 digits): a longer number, or one
  // Number() reads from another form, would make every later path one it refuses.
  it.each([
    ['2.png and notes.txt', "w('2.png'); w('notes.txt')", '3.png'],
    ['a file named by a timestamp in ms', "w('1733456789012.png')", '1.png'],
    ['files named 1e21, 0x10 and Infinity', "w('1e21.png'); w('0x10.png'); w('Infinity.png')", '1.png'],
    ['the last number the gateway takes', "w('999999999.png')", undefined],
  ])('saves an image after a figures directory holding %s', async (_name, write, saved) => {
    session = await startSession('node');
    const f = JSON.stringify(session.kernel.figuresDir);
    const code = `const fs = require('fs'); fs.mkdirSync(${f}, { recursive: true }); const w = (n) => fs.writeFileSync(${f} + '/' + n, '');
${write}
display(new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3])); 1`;
    const { frame, displays } = await session.client.exec(code);
    expect(frame).toMatchObject({ status: 'ok' });
    expect(displays).toEqual([expect.objectContaining({ kind: 'image' })]);
    expect(displays[0]?.path).toBe(saved && join(session.kernel.figuresDir, saved));
  });

  // The kernel empties its display directory at each call: the one it made, not one the code names.
  it('keeps to its own display directory when the code points CODEMODE_DISPLAY_DIR elsewhere', async () => {
    session = await startSession('node');
    const elsewhere = mkdtempSync(join(tmpdir(), 'codemode-elsewhere-'));
    try {
      writeFileSync(join(elsewhere, 'keep.txt'), 'mine');
      const first = await session.client.exec(`process.env.CODEMODE_DISPLAY_DIR = ${JSON.stringify(elsewhere)}; 1`);
      const second = await session.client.exec('2');
      expect([first.displays, second.displays]).toEqual([[], []]);
      expect(readFileSync(join(elsewhere, 'keep.txt'), 'utf8')).toBe('mine');
    } finally {
      rmSync(elsewhere, { recursive: true, force: true });
    }
  });

  it('lets the texts of one call share its cap', async () => {
    session = await startSession('node');
    const code = `display('a'.repeat(6)); display('<b>' + 'é'.repeat(20), { mime: 'text/html' }); display('c'); 1`;
    const { displays } = await session.client.request({ op: 'exec', code, timeoutMs: 10_000, capChars: 10 });
    expect(displays.map((d) => d.text)).toEqual(['a'.repeat(6), '<b>é', expect.stringContaining('share the cap of 10 characters')]);
  });
});
