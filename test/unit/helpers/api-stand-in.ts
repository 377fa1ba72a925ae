// Two local ports standing in for the API server's Service in the network-check tests: one that
// accepts connections (the pod can still reach the network) and one that refuses them (it cannot).
import { createServer, type Server } from 'node:net';

async function listen(onConnection: () => void = () => undefined): Promise<Server> {
  const s = createServer((c) => {
    onConnection();
    c.destroy();
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return s;
}

export interface ApiStandIn {
  openPort: number;
  closedPort: number;
  /** Connections the open port has accepted so far. */
  accepted(): number;
  close(): Promise<void>;
}

export async function apiStandIn(): Promise<ApiStandIn> {
  let accepted = 0;
  const server = await listen(() => accepted++);
  const gone = await listen();
  const closedPort = (gone.address() as { port: number }).port;
  await new Promise((r) => gone.close(r));
  return {
    openPort: (server.address() as { port: number }).port,
    closedPort,
    accepted: () => accepted,
    close: () => new Promise((r) => server.close(() => r())),
  };
}
