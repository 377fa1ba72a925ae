// The kernels' network check (runtime/python/codemode_kernel/server.py, runtime/node/kernel.js): a
// kernel in a pod that can still reach the API server's Service never opens its socket, so no call
// reaches the interpreter. A local port stands in for the Service.
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiStandIn, type ApiStandIn } from '../helpers/api-stand-in.js';
import { Kernel } from './harness.js';

let ports: ApiStandIn;
let openPort = 0;
let closedPort = 0;

beforeAll(async () => {
  ports = await apiStandIn();
  ({ openPort, closedPort } = ports);
});
afterAll(() => ports.close());

const env = (port: number): Record<string, string> => ({
  CODEMODE_NETWORK_CHECK: '1',
  KUBERNETES_SERVICE_HOST: '127.0.0.1',
  KUBERNETES_SERVICE_PORT: String(port),
});

/** A kernel started with the refusing port as the API server, connected: `fn` gets the client. */
async function withClient(language: 'python' | 'node', args: string[], fn: (client: Awaited<ReturnType<Kernel['connect']>>) => Promise<void>): Promise<void> {
  const kernel = await Kernel.start(language, args, env(closedPort));
  try {
    const client = await kernel.connect();
    await fn(client);
    await client.close();
  } finally {
    await kernel.stop();
  }
}

describe.each(['python', 'node'] as const)('the %s kernel', (language) => {
  it('starts when the API server refuses, and answers calls', async () => {
    await withClient(language, [], async (client) => {
      expect((await client.ping()).frame.type).toBe('pong');
    });
  });

  it('never opens its socket while the API server can be reached, and exits saying why', async () => {
    const before = ports.accepted();
    await expect(Kernel.start(language, [], env(openPort))).rejects.toThrow(/exited with 3.*Refused to start: the pod could still reach the network/s);
    // Every 10 ms for 2 s, then every 50 ms: ~360 connects to the API server in 10 s, not ~1,000.
    expect(ports.accepted() - before).toBeLessThan(600);
  }, 60_000);
});

/** Listens on `port` (the stand-in's refusing one) until closed: the network is back. */
async function reachable(port: number): Promise<{ close(): Promise<void> }> {
  const s = createServer((c) => c.destroy());
  await new Promise<void>((r) => s.listen(port, '127.0.0.1', r));
  return { close: () => new Promise<void>((r) => s.close(() => r())) };
}

// A call sent with "netcheck" (the gateway sends it after the NetworkPolicy was restored) runs
// only once the pod cannot reach the API server again: the kernel checked at its start only, and
// the CNI re-programs a restored policy a moment later.
describe.each([
  ['python', 'x = 1', 'x = 2', 'print(x)', 'print(1)'],
  ['node', 'var x = 1', 'x = 2', 'console.log(x)', 'console.log(1)'],
] as const)('a %s kernel given a call with netcheck', (language, setOne, setTwo, show, one) => {
  it('waits until the network is unreachable again, then runs the code', async () => {
    const kernel = await Kernel.start(language, [], env(closedPort));
    const network = await reachable(closedPort);
    try {
      const client = await kernel.connect();
      const reply = client.exec(one, { netcheck: true });
      await new Promise((r) => setTimeout(r, 400));
      const cut = performance.now();
      await network.close();
      const r = await reply;
      expect(r.frame).toMatchObject({ status: 'ok', stdout: '1\n' });
      expect(r.frame.notIsolated).toBeUndefined();
      expect(r.at, 'the code ran only after the network was cut').toBeGreaterThan(cut);
      await client.close();
    } finally {
      await network.close().catch(() => undefined);
      await kernel.stop();
    }
  }, 30_000);

  it('refuses it while the network stays reachable: the code does not run and the session keeps its state', async () => {
    await withClient(language, [], async (client) => {
      expect((await client.exec(setOne)).frame.status).toBe('ok');
      const network = await reachable(closedPort);
      let refused;
      let plain;
      try {
        refused = await client.exec(setTwo, { netcheck: true, timeoutMs: 30_000 });
        // Without netcheck the call is not delayed (the steady state pays nothing).
        plain = await client.exec(show);
      } finally {
        await network.close();
      }
      expect(refused.frame).toMatchObject({ status: 'error', notIsolated: true, error: { ename: 'NetworkNotIsolated' } });
      expect(refused.frame.error?.evalue).toMatch(/could still reach the network .*so the code was not run/);
      expect(plain.frame).toMatchObject({ status: 'ok', stdout: '1\n' });
      expect((await client.exec(show, { netcheck: true })).frame).toMatchObject({ status: 'ok', stdout: '1\n' });
    });
  }, 60_000);

  it('answers a netcheck that is not a boolean with a ProtocolError', async () => {
    await withClient(language, [], async (client) => {
      const r = await client.exec(one, { netcheck: 'yes' });
      expect(r.frame).toMatchObject({ status: 'error', error: { ename: 'ProtocolError', evalue: '"netcheck" must be a boolean' } });
    });
  });
});

it('a python kernel refuses a one-shot run with netcheck while the network is reachable (warm pool pods)', async () => {
  const kernel = await Kernel.start('python', ['--prestart'], env(closedPort));
  const network = await reachable(closedPort);
  try {
    const client = await kernel.connect();
    const r = await client.run('python', 'print(1)', { netcheck: true, timeoutMs: 30_000 });
    expect(r.frame).toMatchObject({ status: 'error', notIsolated: true, stdout: '' });
    await client.close();
  } finally {
    await network.close();
    await kernel.stop();
  }
}, 60_000);

/** The one-shot interpreters `pid` prestarted (their command line is the run bootstrap). */
function prestarted(pid: number): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'latin1');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid && readFileSync(`/proc/${entry}/cmdline`, 'latin1').includes('_codemode_run')) found.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

// A cold pod's run arrives a few ms after the kernel's check passes: the interpreter it runs in
// must already be starting then, not start after the check (~20 ms of every cold run).
it("a python kernel with --prestart starts the run's interpreter while its network check waits, and runs the code in it", async () => {
  const network = await reachable(closedPort);
  const kernel = Kernel.launch('python', ['--prestart'], env(closedPort));
  try {
    let pid: number | undefined;
    for (const until = Date.now() + 10_000; pid === undefined && Date.now() < until;) {
      await new Promise((r) => setTimeout(r, 20));
      pid = prestarted(kernel.proc.pid ?? -1)[0];
    }
    expect(pid, 'an interpreter started while the pod could still reach the network').toBeDefined();
    expect(kernel.stderr, 'the socket waits for the network check').not.toContain('Started kernel');
    await network.close();
    await kernel.started();
    const client = await kernel.connect();
    const r = await client.run('python', 'import os; print(os.getpid())');
    expect(r.frame).toMatchObject({ status: 'ok', stdout: `${pid}\n` });
    await client.close();
  } finally {
    await network.close().catch(() => undefined);
    await kernel.stop();
  }
}, 30_000);
