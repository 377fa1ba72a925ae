// A real Prometheus for the metrics tests: Debian's package unpacked into the cache by
// test/cluster/install-prometheus.sh (run here too, so a test works on a fresh machine in any
// order), started in its own temp dir on a free port, queried through its HTTP API.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface PrometheusBins {
  prometheus: string;
  promtool: string;
}

/** Installs (once, cached) and returns the paths of prometheus and promtool. */
export async function ensurePrometheus(): Promise<PrometheusBins> {
  const { stdout } = await run('bash', ['test/cluster/install-prometheus.sh'], { timeout: 300_000 });
  const dir = stdout.trim().split('\n').pop() ?? '';
  return { prometheus: join(dir, 'prometheus'), promtool: join(dir, 'promtool') };
}

/** A TCP port nobody listens on right now. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export interface PromResult {
  status: string;
  error?: string;
  data?: { resultType: string; result: Array<{ metric: Record<string, string>; value: [number, string] }> };
}

export interface RunningPrometheus {
  url: string;
  /** An instant query; never throws for a PromQL error (status "error" says it). */
  query(expr: string): Promise<PromResult>;
  stop(): Promise<void>;
}

/**
 * Starts Prometheus scraping `target` (host:port, path /metrics) every second as job `job`.
 * Everything it writes lives in a temp dir removed by stop().
 */
export async function startPrometheus(bins: PrometheusBins, target: string, job: string): Promise<RunningPrometheus> {
  const dir = mkdtempSync(join(tmpdir(), 'codemode-prometheus-'));
  const port = await freePort();
  const config = `global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: ${job}\n    metrics_path: /metrics\n    static_configs:\n      - targets: ['${target}']\n`;
  writeFileSync(join(dir, 'prometheus.yml'), config);
  const child: ChildProcess = spawn(
    bins.prometheus,
    [`--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => void (stderr = (stderr + d.toString()).slice(-4000)));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const url = `http://127.0.0.1:${port}`;
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const killed = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(killed);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 60_000;
  for (;;) {
    const ready = await fetch(`${url}/-/ready`)
      .then((r) => r.ok)
      .catch(() => false);
    if (ready) break;
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`Prometheus did not become ready: ${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  return {
    url,
    async query(expr: string): Promise<PromResult> {
      const res = await fetch(`${url}/api/v1/query`, { method: 'POST', body: new URLSearchParams({ query: expr }) });
      return (await res.json()) as PromResult;
    },
    stop,
  };
}
