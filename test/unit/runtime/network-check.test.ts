// The kernels' network check (runtime/python/codemode_kernel/server.py, runtime/node/kernel.js): a
// kernel in a pod that can still reach the API server's Service never opens its socket, so no call
// reaches the interpreter. A local port stands in for the Service.
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

describe.each(['python', 'node'] as const)('the %s kernel', (language) => {
  it('starts when the API server refuses, and answers calls', async () => {
    const kernel = await Kernel.start(language, [], env(closedPort));
    try {
      const client = await kernel.connect();
      expect((await client.ping()).frame.type).toBe('pong');
      await client.close();
    } finally {
      await kernel.stop();
    }
  });

  it('never opens its socket while the API server can be reached, and exits saying why', async () => {
    await expect(Kernel.start(language, [], env(openPort))).rejects.toThrow(/exited with 3.*Refused to start: the pod could still reach the network/s);
  }, 60_000);
});
