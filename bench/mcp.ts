// execute_code through a real MCP client (current protocol) against the in-process gateway.
import { connect, type TestClient, type ToolResult } from '../test/e2e/helpers/operator.js';

export const PRINT_1_CODE = 'print(1)';

export interface TimedCall {
  /** performance.now() at the call and at the reply. */
  start: number;
  end: number;
  run?: string;
}

export interface McpLatency {
  samples: number[];
  /** The unrecorded calls' latencies, in order (failed ones left out). */
  warmupSamples: number[];
  calls: TimedCall[];
  errors: number;
  firstError?: string;
}

function check(r: ToolResult): string | undefined {
  const s = r.structuredContent;
  if (r.isError || s?.phase !== 'Succeeded' || s.stdout !== '1\n') {
    return `execute_code did not print 1: ${JSON.stringify(s ?? r.content).slice(0, 300)}`;
  }
  return undefined;
}

/** One execute_code of `print(1)`; throws when the run did not succeed with the right output. */
export async function timedExecuteCode(client: TestClient, extra: Record<string, unknown> = {}): Promise<TimedCall> {
  const start = performance.now();
  const r = await client.callTool('execute_code', { code: PRINT_1_CODE, language: 'python', ...extra });
  const end = performance.now();
  const problem = check(r);
  if (problem) throw new Error(problem);
  return { start, end, run: String(r.structuredContent?.run ?? '') };
}

export interface LatencyOptions {
  /** Unrecorded calls first (the first run in a namespace also checks the NetworkPolicy). */
  warmup?: number;
  afterWarmup?: () => Promise<void>;
  /** Awaited before every call, outside the timing (e.g. until the warm pool is full). */
  beforeEach?: () => Promise<void>;
  /** Extra execute_code arguments (e.g. a session). */
  args?: Record<string, unknown>;
}

/** Sequential execute_code calls from one client. */
export async function executeCodeLatency(url: string, n: number, opts: LatencyOptions = {}): Promise<McpLatency> {
  const client = await connect(url, 'current');
  const out: McpLatency = { samples: [], warmupSamples: [], calls: [], errors: 0 };
  const attempt = async (record: boolean): Promise<void> => {
    await opts.beforeEach?.();
    try {
      const call = await timedExecuteCode(client, opts.args);
      if (!record) {
        out.warmupSamples.push(call.end - call.start);
        return;
      }
      out.samples.push(call.end - call.start);
      out.calls.push(call);
    } catch (err) {
      out.errors++;
      out.firstError ??= String(err);
    }
  };
  try {
    for (let i = 0; i < (opts.warmup ?? 2); i++) await attempt(false);
    await opts.afterWarmup?.();
    for (let i = 0; i < n; i++) await attempt(true);
  } finally {
    await client.close();
  }
  return out;
}

/**
 * The gateway's fixed cost: an execute_code the gateway refuses before any Kubernetes call (empty
 * code), so the round trip is HTTP + MCP + a fresh McpServer + argument validation.
 */
export async function mcpRoundTrip(url: string, n: number): Promise<number[]> {
  const client = await connect(url, 'current');
  const samples: number[] = [];
  try {
    for (let i = 0; i < n + 3; i++) {
      const t0 = performance.now();
      const r = await client.callTool('execute_code', { code: '' });
      if (!r.isError) throw new Error('an empty execute_code was not refused');
      if (i >= 3) samples.push(performance.now() - t0);
    }
  } finally {
    await client.close();
  }
  return samples;
}
