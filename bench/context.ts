// What every bench section shares: the cluster, the settings, the results being filled in, the
// bench namespaces (deleted at the end) and things to stop.
import { createNamespace, deleteNamespace, type TestKube } from '../test/e2e/helpers/kube.js';
import type { BenchSettings } from './env.js';
import type { Latency, Results } from './report.js';
import { rounded, summarize } from './stats.js';

export class Namespaces {
  private readonly names: string[] = [];
  constructor(private readonly k: TestKube) {}

  /** A fresh `<prefix>-xxxxxx` namespace; prefixes start with `bench-`. */
  async create(prefix: string): Promise<string> {
    const ns = await createNamespace(this.k, prefix);
    this.names.push(ns);
    return ns;
  }

  /** Deletes one namespace now (frees the node for the next section). */
  async delete(ns: string): Promise<void> {
    const i = this.names.indexOf(ns);
    if (i >= 0) this.names.splice(i, 1);
    await deleteNamespace(this.k, ns);
  }

  async deleteAll(): Promise<void> {
    await Promise.all(this.names.splice(0).map((ns) => deleteNamespace(this.k, ns)));
  }
}

export interface BenchContext {
  k: TestKube;
  s: BenchSettings;
  r: Results;
  nss: Namespaces;
  /** Stopped in reverse order when the sections that use them are done (or on failure). */
  stops: Array<() => Promise<void>>;
}

/** Stops what the finished sections started, newest first; a failed stop is logged, not thrown. */
export async function stopAll(ctx: BenchContext): Promise<void> {
  for (const stop of ctx.stops.splice(0).reverse()) await stop().catch((err: unknown) => log(`stop failed: ${String(err)}`));
}

export function log(msg: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export function latency(l: { samples: number[]; errors: number; firstError?: string }): Latency {
  return { ms: rounded(summarize(l.samples)), errors: l.errors, ...(l.firstError ? { firstError: l.firstError } : {}) };
}

/** The message of a section that failed, kept in its slot instead of ending the whole run. */
export function failed(what: string, err: unknown): string {
  const msg = err instanceof Error ? err.message : String(err);
  log(`${what} failed: ${msg}`);
  return `failed: ${msg.slice(0, 200)}`;
}

export { inBatches } from './batches.js';
