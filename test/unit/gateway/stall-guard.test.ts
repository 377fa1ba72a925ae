// Responses whose client stopped reading (stall-guard.ts): their connection is closed once they
// have had bytes waiting, none of them sent, for the stall time; a slow reader and a call that
// sends nothing while it runs are left alone. As data (the guard's look at a socket) and over real
// HTTP, with results as large as a call's images may be.
import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StallGuard } from '../../../src/gateway/stall-guard.js';
import { outcome, rawMcpPost, sleep, startGateway, type Gateway } from './harness.js';

/** A response whose socket reports `waiting` bytes queued and `sent` bytes gone, as each look finds them. */
function fakeResponse() {
  const socket = { destroyed: false, writableLength: 0, bytesWritten: 0, _handle: { writeQueueSize: 0 }, destroy: () => void (socket.destroyed = true) };
  const res = Object.assign(new EventEmitter(), { closed: false, socket }) as unknown as ServerResponse;
  const set = (waiting: number, sent: number, queued = 0): void => {
    socket.writableLength = waiting;
    socket.bytesWritten = sent + waiting;
    socket._handle.writeQueueSize = queued;
  };
  return { res, socket, set };
}

describe('StallGuard', () => {
  it.each([
    [
      'nothing waiting (a call that sends nothing while it runs)',
      [
        [0, 100],
        [0, 100],
        [0, 100],
        [0, 100],
      ],
      false,
    ],
    [
      'bytes waiting while others leave (a slow reader)',
      [
        [50, 100],
        [50, 200],
        [50, 300],
        [50, 400],
      ],
      false,
    ],
    [
      'one large write leaving bit by bit (only the write queue shrinks)',
      [
        [50, 100, 40],
        [50, 100, 30],
        [50, 100, 20],
        [50, 100, 10],
      ],
      false,
    ],
    [
      'bytes waiting, none leaving, for less than the stall time',
      [
        [50, 100],
        [50, 100],
        [50, 100],
        [0, 150],
      ],
      false,
    ],
    [
      'bytes waiting, none leaving, for the stall time',
      [
        [50, 100],
        [50, 100],
        [50, 100],
        [50, 100],
      ],
      true,
    ],
  ])('%s', (_name, looks, closed) => {
    let t = 0;
    const stalled: number[] = [];
    const guard = new StallGuard(
      20_000,
      (waiting) => stalled.push(waiting),
      () => t,
    );
    const r = fakeResponse();
    guard.watch(r.res);
    for (const [waiting, sent, queued] of looks as Array<[number, number, number?]>) {
      r.set(waiting, sent, queued);
      guard.sweep();
      t += 10_000;
    }
    expect(r.socket.destroyed).toBe(closed);
    expect(stalled).toEqual(closed ? [50] : []);
    r.res.emit('close');
    expect(guard.size).toBe(0);
  });
});

describe('a client that stops reading its results, over HTTP', () => {
  let gateway: Gateway;
  const image = Buffer.alloc(4 * 1024 * 1024, 7).toString('base64');
  const BODY = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'execute_code', arguments: { code: 'show()' } } });

  beforeAll(async () => {
    gateway = await startGateway({}, undefined, { stalledResponseMs: 500 });
    gateway.service.behaviour = async () =>
      outcome({ display: [1, 2, 3].map(() => ({ kind: 'image' as const, mime: 'image/png', data: image, bytes: 4 * 1024 * 1024 })) });
  });
  afterAll(async () => {
    await gateway.close();
  });

  /**
   * Sends one call on a new connection and reads it as `read` says for `readMs`, then reads the
   * rest at full speed: the bytes the client got in all, and whether the server had closed the
   * connection ('closed') or it was still open 2 s later ('open').
   */
  async function callAndRead(read: (socket: Socket) => void, readMs: number): Promise<{ got: number; end: 'closed' | 'open' }> {
    const socket = await rawMcpPost(gateway.port, BODY, { paused: true });
    let got = 0;
    // Paused by hand: a data listener does not resume it.
    socket.on('data', (chunk: Buffer) => (got += chunk.length));
    const closed = new Promise<'closed'>((resolve) => socket.once('close', () => resolve('closed')));
    read(socket);
    await sleep(readMs);
    socket.resume();
    const end = await Promise.race([closed, sleep(2_000).then(() => 'open' as const)]);
    socket.destroy();
    return { got, end };
  }

  const RESULT_BYTES = 3 * image.length;

  it('closes the connection of a client that stops reading its result', async () => {
    const r = await callAndRead(() => undefined, 2_000);
    expect(r.end).toBe('closed');
    expect(r.got).toBeLessThan(RESULT_BYTES);
  });

  it('keeps serving a client that reads slowly, to the end of its result', async () => {
    const r = await callAndRead((socket) => {
      const timer = setInterval(() => socket.read(256 * 1024), 50);
      socket.once('close', () => clearInterval(timer));
    }, 2_000);
    expect(r.end).toBe('open');
    expect(r.got).toBeGreaterThan(RESULT_BYTES);
  });
});
