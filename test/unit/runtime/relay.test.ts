// The relays wait for a kernel that is not listening yet: a pool pod is Ready as soon as its
// container started, and the gateway connects right then.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FrameDecoder, encodeFrame } from '../../../src/exec/framing.js';
import { RUNTIME_DIR } from './harness.js';

const relays: Array<[string, string, string]> = [
  ['python', 'python3', join(RUNTIME_DIR, 'python/relay.py')],
  ['node', process.execPath, join(RUNTIME_DIR, 'node/relay.js')],
];

describe.each(relays)('%s relay', (_name, cmd, script) => {
  it('connects once the kernel starts listening, and relays frames', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'codemode-relay-'));
    const socket = join(dir, 'run', 'kernel.sock');
    const relay = spawn(cmd, [script, socket], { stdio: ['pipe', 'pipe', 'pipe'] });
    let kernel: ReturnType<typeof spawn> | undefined;
    try {
      const decoder = new FrameDecoder();
      const reply = new Promise<unknown>((resolve, reject) => {
        relay.stdout.on('data', (c: Buffer) => {
          const [first] = decoder.push(c);
          if (first) resolve(first);
        });
        relay.on('exit', (code) => reject(new Error(`relay exited with ${code}`)));
      });
      relay.stdin.write(encodeFrame({ op: 'ping', id: 'p1' }));
      await new Promise((r) => setTimeout(r, 400));
      expect(relay.exitCode).toBeNull();
      kernel = spawn('python3', [join(RUNTIME_DIR, 'python/kernel.py'), '--socket', socket], { stdio: 'ignore' });
      expect(await reply).toMatchObject({ id: 'p1', type: 'pong', language: 'python' });
    } finally {
      relay.kill('SIGKILL');
      kernel?.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });

  // The python relay hands its stdin and stdout to the kernel and waits: when the gateway ends
  // the stream (stdin closes), the kernel must let go of it so that the relay (whose exit ends
  // the exec) goes, and keep serving the next relay.
  it('exits 0 once the stream it carries ends, and the kernel serves the next relay', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'codemode-relay-'));
    const socket = join(dir, 'kernel.sock');
    const kernel = spawn('python3', [join(RUNTIME_DIR, 'python/kernel.py'), '--socket', socket], { stdio: 'ignore' });
    try {
      for (const id of ['p1', 'p2']) {
        const relay = spawn(cmd, [script, socket], { stdio: ['pipe', 'pipe', 'inherit'] });
        const exited = new Promise<number | null>((r) => relay.on('exit', r));
        const decoder = new FrameDecoder();
        const reply = new Promise<unknown>((resolve) => relay.stdout.on('data', (c: Buffer) => decoder.push(c).forEach(resolve)));
        relay.stdin.write(encodeFrame({ op: 'ping', id }));
        expect(await reply).toMatchObject({ id, type: 'pong' });
        relay.stdin.end();
        expect(await exited).toBe(0);
      }
    } finally {
      kernel.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('gives up with exit code 3 when no kernel ever listens', { timeout: 20_000 }, async () => {
    const relay = spawn(cmd, [script, join(tmpdir(), 'codemode-no-such-dir', 'kernel.sock')], { stdio: ['pipe', 'ignore', 'pipe'] });
    let err = '';
    relay.stderr.on('data', (c: Buffer) => (err += c.toString()));
    const code = await new Promise<number | null>((r) => relay.on('exit', r));
    expect(code).toBe(3);
    expect(err).toMatch(/relay: .*kernel/);
  });
});
