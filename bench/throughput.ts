// Closed-loop throughput: `concurrency` workers each issue one call at a time until the window
// ends, then finish the call in flight. At most `concurrency` (≤ 64) calls are ever in flight and
// the loop stops by itself; runs/s counts completed calls over the time until the last one ended.
import { connect, type TestClient } from '../test/e2e/helpers/operator.js';
import type { TestKube } from '../test/e2e/helpers/kube.js';
import { inBatches } from './context.js';
import { PRINT_1, timedExec } from './floor.js';
import { timedExecuteCode } from './mcp.js';
import { rounded, summarize, type Summary } from './stats.js';

export const MAX_IN_FLIGHT = 64;

export interface ThroughputLevel {
  concurrency: number;
  windowMs: number;
  elapsedMs: number;
  completed: number;
  errors: number;
  firstError?: string;
  runsPerSecond: number;
  latencyMs: Summary;
}

type Call = () => Promise<number>;

export async function closedLoop(concurrency: number, windowMs: number, calls: readonly Call[]): Promise<ThroughputLevel> {
  if (concurrency > MAX_IN_FLIGHT || calls.length !== concurrency) throw new Error(`closedLoop needs 1..${MAX_IN_FLIGHT} workers, one call each`);
  const latencies: number[] = [];
  let errors = 0;
  let firstError: string | undefined;
  const t0 = performance.now();
  const deadline = t0 + windowMs;
  await Promise.all(
    calls.map(async (call) => {
      while (performance.now() < deadline) {
        try {
          latencies.push(await call());
        } catch (err) {
          errors++;
          firstError ??= String(err);
          // A failing call can return at once: do not spin on it.
          await new Promise((r) => setTimeout(r, 100));
        }
      }
    }),
  );
  const elapsedMs = performance.now() - t0;
  return {
    concurrency,
    windowMs,
    elapsedMs: Math.round(elapsedMs),
    completed: latencies.length,
    errors,
    ...(firstError ? { firstError } : {}),
    runsPerSecond: Math.round((latencies.length / (elapsedMs / 1000)) * 100) / 100,
    latencyMs: rounded(summarize(latencies)),
  };
}

/**
 * execute_code(`print(1)`) from `concurrency` MCP clients, each with its own connection; with
 * `sessions`, client i calls in sessions[i] (one interpreter each: calls in one session queue).
 */
export async function executeCodeThroughput(url: string, concurrency: number, windowMs: number, sessions?: readonly string[]): Promise<ThroughputLevel> {
  if (sessions && sessions.length < concurrency) throw new Error(`${concurrency} clients need ${concurrency} sessions, got ${sessions.length}`);
  const clients: TestClient[] = [];
  try {
    for (let i = 0; i < concurrency; i++) clients.push(await connect(url, 'current'));
    return await closedLoop(
      concurrency,
      windowMs,
      clients.map((c, i) => async () => {
        const call = await timedExecuteCode(c, sessions ? { session: sessions[i] } : {});
        return call.end - call.start;
      }),
    );
  } finally {
    await Promise.allSettled(clients.map((c) => c.close()));
  }
}

const SESSION_BATCH = 8;

/** `n` python sessions opened with create_session over MCP, SESSION_BATCH at a time. */
export async function openSessions(url: string, n: number): Promise<string[]> {
  const client = await connect(url, 'current');
  try {
    return await inBatches(n, SESSION_BATCH, async () => {
      const r = await client.callTool('create_session', { language: 'python' });
      const session = r.structuredContent?.session;
      if (r.isError || typeof session !== 'string') throw new Error(`create_session failed: ${JSON.stringify(r.content).slice(0, 300)}`);
      return session;
    });
  } finally {
    await client.close();
  }
}

/** `python3 -c 'print(1)'` execs to ONE running pod from `concurrency` callers. */
export function rawExecThroughput(k: TestKube, ns: string, pod: string, concurrency: number, windowMs: number): Promise<ThroughputLevel> {
  const call: Call = () => timedExec(k, ns, pod, PRINT_1);
  return closedLoop(
    concurrency,
    windowMs,
    Array.from({ length: concurrency }, () => call),
  );
}
