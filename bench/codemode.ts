// Code mode (issue 11): one nested tool call's round trip measured inside sandbox code, against
// the same call made directly from the gateway process to the upstream (its registry's warm MCP
// client); nested calls per second from one session; and the context an agent pays for tools —
// the upstream's own tools/list against the gateway's (code mode lists no upstream tool), counted
// with a real tokenizer (gpt-tokenizer, o200k_base), for the everything server and a synthetic
// catalog of 500 tools. The upstream is the reference "everything" server, declared as an
// UpstreamServer, so the nested path is the real one: kernel → exec stream → broker → registry.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { encode } from 'gpt-tokenizer';
import { GROUP, UPSTREAMSERVER_PLURAL, VERSION } from '../src/api/v1alpha1/index.js';
import { formatRows } from '../src/gateway/tools/result-format.js';
import { signatureLine } from '../src/upstreams/signature.js';
import { until } from '../test/e2e/helpers/kube.js';
import { connect, startOperator } from '../test/e2e/helpers/operator.js';
import { startEverything } from '../test/e2e/helpers/upstream.js';
import { failed, latency, log, type BenchContext } from './context.js';
import { scaled } from './env.js';
import type { Latency } from './report.js';
import type { Metrics } from '../src/metrics/registry.js';
import { rounded, summarize, type Summary } from './stats.js';

const round2 = (v: number): number => Math.round(v * 100) / 100;

export interface CodeModeResult {
  /** The same echo call from the gateway process (its warm client to the upstream). */
  direct: Latency;
  /** One echo call timed inside the sandbox program, in a session. */
  nested: Latency;
  /** Calls made on each path before the timed ones (older results: absent, 5). */
  warmupCalls?: number;
  /** The first of the nested warm-up calls: a fresh gateway's broker path. */
  nestedFirstCallsMs?: Summary;
  /** Nested calls per second, one program in one session calling back to back. */
  callsPerSecond: number;
  /**
   * The timed program's calls (the timed ones and the per-second loop), means in ms: as the program
   * timed them, and in the gateway's broker (frame in to answer out: the upstream call and its
   * checks, from codemode_upstream_call_duration_seconds); the rest is the exec stream both ways,
   * the kernel and the sandbox's module. Absent in results before 2026-12-05 15:05.
   */
  split?: { nestedMeanMs: number; brokerMeanMs: number };
  tokens: { upstreamToolsList: number; gatewayToolsList: number; synthetic500ToolsList: number; upstreamTools: number };
  /** Tokens of one search_tools answer (10 hits) written as text lines, compact JSON and TOON. */
  searchTokens: { hits: number; text: number; json: number; toon: number };
}

/** Tokens of what a tools/list result puts in an agent's context (the tools as JSON). */
const tokens = (tools: unknown): number => encode(JSON.stringify(tools)).length;

/** A plausible catalog of 500 tools: 25 services × 20 operations, 2–6 typed parameters each. */
export function syntheticCatalog(): unknown[] {
  const services = Array.from({ length: 25 }, (_, i) => `service${i + 1}`);
  const verbs = ['list', 'get', 'create', 'update', 'delete', 'search', 'archive', 'restore', 'assign', 'comment'];
  const nouns = ['items', 'projects'];
  return services.flatMap((svc) =>
    verbs.flatMap((verb) =>
      nouns.map((noun, n) => {
        const params = 2 + ((verb.length + n) % 5);
        const properties = Object.fromEntries(
          Array.from({ length: params }, (_, p) => [
            `${noun.slice(0, -1)}_field_${p}`,
            { type: p % 3 === 0 ? 'integer' : 'string', description: `The ${noun.slice(0, -1)}'s field number ${p} used by ${verb}.` },
          ]),
        );
        return {
          name: `${svc}_${verb}_${noun}`,
          description: `${verb[0]?.toUpperCase()}${verb.slice(1)} ${noun} in ${svc}. Returns the affected ${noun} with their identifiers, owners and timestamps; fails when the caller lacks access.`,
          inputSchema: { type: 'object', properties, required: Object.keys(properties).slice(0, 1) },
        };
      }),
    ),
  );
}

/**
 * Calls made on each path before the timed ones (as for session calls, bench/warm.ts): a nested
 * call crosses code of the gateway (broker, kernel stream) that the direct path never runs, and
 * the first few hundred calls of a fresh process run V8's unoptimised code. The first 100 of the
 * nested ones are reported beside the row. Before 2026-11-25 both paths followed 5.
 */
export const CODEMODE_WARMUP_CALLS = 300;
const FIRST_CALLS = 100;

/** The warm-up calls, in a program of their own, so the broker's figures cover only the timed program. */
const WARMUP_PROGRAM = `import json, time
from codemode import mcp
first = []
for _ in range(${CODEMODE_WARMUP_CALLS}):
    t0 = time.perf_counter()
    mcp.everything.echo(message="x")
    first.append((time.perf_counter() - t0) * 1000)
print(json.dumps({"first": first[:${FIRST_CALLS}]}))
`;

const NESTED_PROGRAM = (n: number): string => `import json, time
from codemode import mcp
ms = []
for _ in range(${n}):
    t0 = time.perf_counter()
    mcp.everything.echo(message="x")
    ms.append((time.perf_counter() - t0) * 1000)
t0 = time.perf_counter()
for _ in range(${n}):
    mcp.everything.echo(message="x")
print(json.dumps({"ms": ms, "perSecond": ${n} / (time.perf_counter() - t0)}))
`;

/** Sum (s) and count of the broker's call durations so far, over every server and outcome. */
async function brokerTotals(metrics: Metrics | undefined): Promise<{ sum: number; count: number }> {
  const h = metrics?.registry.getSingleMetric('codemode_upstream_call_duration_seconds');
  const values = h ? (await h.get()).values : [];
  const total = (suffix: string): number => values.filter((v) => (v as { metricName?: string }).metricName?.endsWith(suffix)).reduce((a, v) => a + v.value, 0);
  return { sum: total('_sum'), count: total('_count') };
}

async function toolsList(url: string, headers: Record<string, string> = {}): Promise<unknown[]> {
  const client = new Client({ name: 'bench-codemode', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  try {
    return (await client.listTools()).tools;
  } finally {
    await client.close();
  }
}

export async function codeModeSection(ctx: BenchContext): Promise<CodeModeResult | string> {
  const n = scaled(ctx.s, 200, 20);
  const ns = await ctx.nss.create('bench-codemode');
  const upstream = await startEverything();
  ctx.stops.push(() => upstream.kill());
  try {
    // With the replica's metrics, as deployed: the broker's own time is read from them.
    const op = await startOperator(ns, { CODEMODE_TOOL_CALLS_PER_RUN: '100000' }, { metrics: true });
    ctx.stops.push(() => op.stop());
    await ctx.k.custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: ns,
      plural: UPSTREAMSERVER_PLURAL,
      body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'UpstreamServer', metadata: { name: 'everything' }, spec: { url: upstream.url } },
    });
    const registry = op.operator.upstreams;
    await until(() => registry.servers(undefined).some((s) => s.name === 'everything' && s.ready), 60_000, 'the everything UpstreamServer ready');

    log(`codemode: echo × ${n} from the gateway process (its warm client), then × ${n} from sandbox code in a session`);
    const direct: number[] = [];
    for (let i = 0; i < n + CODEMODE_WARMUP_CALLS; i++) {
      const t0 = performance.now();
      await registry.call(undefined, 'everything', 'echo', { message: 'x' });
      if (i >= CODEMODE_WARMUP_CALLS) direct.push(performance.now() - t0);
    }
    const client = await connect(op.url, 'current');
    let nested: { ms: number[]; perSecond: number };
    let first: number[];
    let broker: { sum: number; count: number };
    try {
      const created = await client.callTool('create_session', { language: 'python' });
      const session = created.structuredContent?.session;
      if (typeof session !== 'string') throw new Error(`create_session failed: ${JSON.stringify(created.content).slice(0, 200)}`);
      const program = async <T>(code: string): Promise<T> => {
        const r = await client.callTool('execute_code', { session, code, timeout_seconds: 300 });
        const stdout = String(r.structuredContent?.stdout ?? '');
        if (r.isError || !stdout.startsWith('{')) throw new Error(`the nested program failed: ${JSON.stringify(r.content).slice(0, 300)}`);
        return JSON.parse(stdout) as T;
      };
      first = (await program<{ first: number[] }>(WARMUP_PROGRAM)).first;
      const before = await brokerTotals(op.metrics);
      nested = await program<{ ms: number[]; perSecond: number }>(NESTED_PROGRAM(n));
      const after = await brokerTotals(op.metrics);
      broker = { sum: after.sum - before.sum, count: after.count - before.count };
      await client.callTool('close_session', { session });
    } finally {
      await client.close();
    }

    const hits = registry.search(undefined, 'get a value from a resource', { limit: 10 });
    const searchTokens = {
      hits: hits.length,
      text: encode(formatRows(hits, 'text', () => hits.map(signatureLine).join('\n'))).length,
      json: encode(formatRows(hits, 'json', () => '')).length,
      toon: encode(formatRows(hits, 'toon', () => '')).length,
    };
    const upstreamTools = await toolsList(upstream.url);
    const gatewayTools = await toolsList(op.url);
    return {
      direct: latency({ samples: direct, errors: 0 }),
      nested: latency({ samples: nested.ms, errors: 0 }),
      warmupCalls: CODEMODE_WARMUP_CALLS,
      nestedFirstCallsMs: rounded(summarize(first)),
      callsPerSecond: Math.round(nested.perSecond),
      // The program's 2n calls: the n timed ones and the per-second loop's n (n / perSecond seconds).
      ...(broker.count === 2 * n && {
        split: {
          nestedMeanMs: round2((nested.ms.reduce((a, b) => a + b, 0) + (1000 * n) / nested.perSecond) / (2 * n)),
          brokerMeanMs: round2((broker.sum * 1000) / broker.count),
        },
      }),
      tokens: {
        upstreamToolsList: tokens(upstreamTools),
        gatewayToolsList: tokens(gatewayTools),
        synthetic500ToolsList: tokens(syntheticCatalog()),
        upstreamTools: upstreamTools.length,
      },
      searchTokens,
    };
  } catch (err) {
    return failed('codemode', err);
  }
}
