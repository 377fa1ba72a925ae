// Starts gateway replicas as child processes (gateway-child.ts) so a test can kill them for real.
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const CHILD = fileURLToPath(new URL('./gateway-child.ts', import.meta.url));

export interface GatewayProcess {
  url: string;
  identity: string;
  /** Resolves with the exit code (or the signal's name) once the process is gone. */
  exited: Promise<number | string>;
  kill(signal: NodeJS.Signals): void;
  /** stderr so far (a failed start says why). */
  stderr(): string;
}

/** The settings every fault test shares: short budgets so a vanished executor's run ends soon. */
export function gatewayEnv(namespace: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    CODEMODE_NAMESPACE: namespace,
    CODEMODE_IMAGE_PULL_POLICY: 'Never',
    CODEMODE_AUTH_MODE: 'none',
    CODEMODE_LOG_LEVEL: 'warn',
    // A vanished executor's run is failed after start-up + timeout + 60 s: keep start-up short.
    CODEMODE_POD_STARTUP_TIMEOUT_SECONDS: '30',
    CODEMODE_MAX_TIMEOUT_SECONDS: '30',
    // Finished runs stay readable until the test's verdict.
    CODEMODE_TTL_SECONDS_AFTER_FINISHED: '3600',
    CODEMODE_RESYNC_SECONDS: '10',
    // Tiny requests: the node is shared.
    CODEMODE_CPU_REQUEST: '10m',
    CODEMODE_MEMORY_REQUEST: '32Mi',
    CODEMODE_WARM_POOL_MIN: '1',
    CODEMODE_WARM_POOL_MAX: '2',
    ...extra,
  };
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** Runs `cmd args` some other way (the bench: in a memory cgroup); `remove` once it exited. */
export type CommandWrapper = (cmd: string, args: readonly string[]) => { cmd: string; args: string[]; remove: () => void };

/**
 * Spawns one replica on `port` and waits until it serves (bounded). `release`: the checkout of
 * another version (release.ts) whose gateway runs instead of this checkout's.
 */
export async function startGateway(
  env: Record<string, string>,
  port: number,
  kubeconfig = process.env.KUBECONFIG ?? '',
  wrap?: CommandWrapper,
  release?: string,
): Promise<GatewayProcess> {
  const script = release === undefined ? CHILD : join(release, 'test/e2e/faults/helpers/gateway-child.ts');
  const args = ['--import', 'tsx', script];
  const command = wrap?.(process.execPath, args) ?? { cmd: process.execPath, args, remove: () => {} };
  const child: ChildProcess = spawn(command.cmd, command.args, {
    env: { ...process.env, ...env, CODEMODE_PORT: String(port), KUBECONFIG: kubeconfig },
    stdio: ['ignore', 'pipe', 'pipe'],
    // tsx and the release's modules resolve from its own directory.
    ...(release !== undefined && { cwd: release }),
  });
  let err = '';
  child.stderr?.on('data', (d: Buffer) => (err = (err + d.toString('utf8')).slice(-4000)));
  const exited = new Promise<number | string>((resolve) =>
    child.once('exit', (code, signal) => {
      command.remove();
      resolve(code ?? signal ?? -1);
    }),
  );
  const ready = await new Promise<{ url: string; identity: string }>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`gateway did not start within 120 s: ${err}`)), 120_000);
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString('utf8');
      const line = out.split('\n').find((l) => l.startsWith('{'));
      if (!line) return;
      clearTimeout(timer);
      resolve(JSON.parse(line) as { url: string; identity: string });
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited (${code}) before serving: ${err}`));
    });
  });
  return { ...ready, exited, kill: (signal) => child.kill(signal), stderr: () => err };
}

/**
 * The value of one series on the replica's /metrics (`series` as Prometheus prints it, labels in
 * the order prom-client prints them, e.g. `codemode_gateway_replicas_gone_total{how="expired"}`);
 * undefined when the replica does not export it.
 */
export async function metricValue(g: Pick<GatewayProcess, 'url'>, series: string): Promise<number | undefined> {
  const res = await fetch(g.url.replace(/\/mcp$/, '/metrics'), { signal: AbortSignal.timeout(10_000) });
  if (!res.ok) throw new Error(`GET /metrics: HTTP ${res.status}`);
  const line = (await res.text()).split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/** Stops a replica if it still runs (SIGKILL after SIGTERM's bounded drain): test clean-up. */
export async function stopGateway(g: GatewayProcess | undefined): Promise<void> {
  if (!g) return;
  g.kill('SIGTERM');
  const done = await Promise.race([g.exited.then(() => true), new Promise<false>((r) => setTimeout(() => r(false), 60_000))]);
  if (!done) g.kill('SIGKILL');
  await g.exited;
}
