// A request's body is held of its user's share of the body budget (body-budget.ts) until its
// response has ended, and also while its tool still runs: a client that sent a large call and went
// away at once ended its response, but the call kept its parsed arguments (a write_file's content,
// twice) while it waited for its session. Counted only until the client left, one user's client
// could send such calls and leave, again and again, and pile up the replica's memory uncounted.
// Over real HTTP with a session service whose pod does not answer yet.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BodyBudget } from '../../../src/gateway/body-budget.js';
import { rawMcpPost, sleep, startGateway, type Gateway } from './harness.js';

const MiB = 1024 * 1024;
const write = (content: string): string =>
  JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'write_file', arguments: { session: 's', path: 'a.txt', content } } });

describe('BodyHold.retain', () => {
  it.each<[string, Array<'release' | 'retain' | 'done1' | 'done2'>, number]>([
    ['released, not retained: given back', ['release'], 0],
    ['retained, then released: still held', ['retain', 'release'], 10],
    ['released while retained, then done: given back', ['retain', 'release', 'done1'], 0],
    ['two retainers: held until both are done', ['retain', 'retain', 'release', 'done1'], 10],
    ['two retainers, both done', ['retain', 'retain', 'release', 'done1', 'done2'], 0],
    ['done twice counts once', ['retain', 'retain', 'release', 'done1', 'done1'], 10],
    ['done before release: release gives back', ['retain', 'done1', 'release'], 0],
    ['retained after it was given back: nothing held again', ['release', 'retain', 'done1'], 0],
  ])('%s', (_name, steps, held) => {
    const budget = new BodyBudget({ perUserBytes: 100, totalBytes: 100 });
    const hold = budget.hold('alice');
    hold.take(10);
    const dones: Array<() => void> = [];
    for (const step of steps) {
      if (step === 'release') hold.release();
      else if (step === 'retain') dones.push(hold.retain());
      else dones[step === 'done1' ? 0 : 1]?.();
    }
    expect([budget.held(), budget.held('alice')]).toEqual([held, held]);
  });
});

describe('a tool still running holds its request body after the client went away', () => {
  let gateway: Gateway;
  let release: () => void = () => undefined;
  let gate = Promise.resolve();
  const written: number[] = [];

  beforeAll(async () => {
    const sessions = {
      writeFile: async (_session: string, _path: string, content: Buffer): Promise<number> => {
        await gate;
        written.push(content.length);
        return content.length;
      },
    };
    gateway = await startGateway({}, undefined, { sessions: sessions as never, bodyBudget: { perUserBytes: 8 * MiB, totalBytes: 64 * MiB } });
  });
  afterAll(async () => {
    release();
    await gateway.close();
  });

  /** Sends a write_file of `bytes` and leaves once the tool has it (its socket destroyed). */
  async function sendAndLeave(bytes: number): Promise<void> {
    const socket = await rawMcpPost(gateway.port, write('a'.repeat(bytes)));
    await sleep(300);
    socket.destroy();
    await sleep(100);
  }

  const post = (bytes: number): Promise<Response> =>
    fetch(gateway.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
      body: write('a'.repeat(bytes)),
    });

  it('refuses the next request past the share while the calls of clients that left still run, and frees it when they end', async () => {
    gate = new Promise<void>((r) => (release = r));
    await sendAndLeave(3 * MiB);
    await sendAndLeave(3 * MiB);
    const refused = await post(3 * MiB);
    expect(refused.status).toBe(429);
    expect(await refused.text()).toMatch(/the most one user may/);
    release();
    await sleep(200);
    expect(written).toEqual([3 * MiB, 3 * MiB]);
    const served = await post(3 * MiB);
    expect(served.status).toBe(200);
    await served.text();
  });
});
