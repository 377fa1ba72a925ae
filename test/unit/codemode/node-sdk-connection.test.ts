// The Node `codemode` module's kept connection to the kernel (runtime/sdk/node/codemode.js), against
// a socket server in this process that answers as told: how answers are framed, split, ordered or
// broken is the kernel's to choose, and the module must give each request its own answer. The real
// kernels are driven in kernel-tool-calls.test.ts.
import { mkdtemp } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { RUNTIME_DIR } from '../runtime/harness.js';

interface Sdk {
  servers(): Promise<unknown>;
}

interface Request {
  callId: string;
  op: string;
}

const SDK = join(RUNTIME_DIR, 'sdk/node/codemode.js');
const require = createRequire(import.meta.url);

/** A fresh module (its own kept connection) talking to `path`. */
function loadSdk(path: string): Sdk {
  process.env.CODEMODE_TOOLS_SOCKET = path;
  delete require.cache[require.resolve(SDK)];
  return require(SDK) as Sdk;
}

const frame = (m: unknown): Buffer => {
  const body = Buffer.from(JSON.stringify(m));
  return Buffer.concat([Buffer.from(`${body.length}\n`), body]);
};

/** A kernel stand-in: `answer` sees each connection's requests as they come, with the socket. */
async function fakeKernel(answer: (reqs: Request[], sock: Socket, conn: number) => void): Promise<{ path: string; server: Server; connections: () => number }> {
  const path = join(await mkdtemp(join(tmpdir(), 'sdk-')), 'tools.sock');
  let connections = 0;
  const server = createServer((sock) => {
    const conn = ++connections;
    const reqs: Request[] = [];
    let buf = Buffer.alloc(0);
    sock.on('data', (c: Buffer) => {
      buf = Buffer.concat([buf, c]);
      for (;;) {
        const nl = buf.indexOf(10);
        if (nl < 0) return;
        const size = Number(buf.subarray(0, nl).toString());
        if (buf.length < nl + 1 + size) return;
        reqs.push(JSON.parse(buf.subarray(nl + 1, nl + 1 + size).toString()) as Request);
        buf = buf.subarray(nl + 1 + size);
        answer(reqs, sock, conn);
      }
    });
    sock.on('error', () => undefined);
  });
  await new Promise<void>((r) => server.listen(path, r));
  servers.push(server);
  return { path, server, connections: () => connections };
}

const servers: Server[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.close();
});

const settle = (p: Promise<unknown>): Promise<unknown> =>
  p.then(
    (v) => ({ ok: v }),
    (e: { kind?: string; message?: string }) => ({ error: e.kind, message: e.message }),
  );

describe('the node codemode module on its kept connection', () => {
  it.each([
    [
      'an answer split into 1 KiB writes',
      (reqs: Request[], sock: Socket) => {
        const whole = frame({ callId: reqs[0]!.callId, ok: true, value: 'x'.repeat(3 << 20) });
        for (let i = 0; i < whole.length; i += 1024) sock.write(whole.subarray(i, i + 1024));
      },
      [{ ok: 'x'.repeat(3 << 20) }],
    ],
    [
      'two answers in one write, the second request first',
      (reqs: Request[], sock: Socket) => {
        if (reqs.length === 2)
          sock.write(Buffer.concat([frame({ callId: reqs[1]!.callId, ok: true, value: 2 }), frame({ callId: reqs[0]!.callId, ok: true, value: 1 })]));
      },
      [{ ok: 1 }, { ok: 2 }],
    ],
    [
      'an answer to no request, then the right one',
      (reqs: Request[], sock: Socket) =>
        sock.write(Buffer.concat([frame({ callId: 'n999', ok: true, value: 'stray' }), frame({ callId: reqs[0]!.callId, ok: true, value: 1 })])),
      [{ ok: 1 }],
    ],
    [
      'a header that is not a length',
      (_reqs: Request[], sock: Socket) => sock.write('x'.repeat(40)),
      [{ error: 'unavailable', message: 'the codemode kernel sent a bad answer' }],
    ],
    [
      'a body that is not JSON',
      (_reqs: Request[], sock: Socket) => sock.write('3\n{{{'),
      [{ error: 'unavailable', message: 'the codemode kernel sent a bad answer' }],
    ],
    [
      'the kernel closing without an answer',
      (_reqs: Request[], sock: Socket) => sock.destroy(),
      [{ error: 'unavailable', message: 'the codemode kernel closed the connection without an answer' }],
    ],
    [
      'the answer to a request it could not read (callId ""), for both waiting',
      (reqs: Request[], sock: Socket) => {
        if (reqs.length === 2) sock.end(frame({ callId: '', ok: false, error: { kind: 'invalid', message: 'not a tool request' } }));
      },
      [
        { error: 'invalid', message: 'not a tool request' },
        { error: 'invalid', message: 'not a tool request' },
      ],
    ],
  ])('%s', async (_name, answer, expected) => {
    const kernel = await fakeKernel(answer);
    const sdk = loadSdk(kernel.path);
    const results = await Promise.all(expected.map(() => settle(sdk.servers())));
    expect(results).toEqual(expected);
  });

  it('opens a new connection for the next request once the kept one broke, and only then', async () => {
    const kernel = await fakeKernel((reqs, sock, conn) => {
      // The second request on the first connection ends it; every other one is answered.
      if (conn === 1 && reqs.length === 2) sock.destroy();
      else sock.write(frame({ callId: reqs.at(-1)!.callId, ok: true, value: conn }));
    });
    const sdk = loadSdk(kernel.path);
    const results = [];
    for (let i = 0; i < 4; i++) results.push(await settle(sdk.servers()));
    expect(results).toEqual([
      { ok: 1 },
      { error: 'unavailable', message: 'the codemode kernel closed the connection without an answer' },
      { ok: 2 },
      { ok: 2 },
    ]);
    expect(kernel.connections()).toBe(2);
  });
});
