// What every bench section shares: the cluster, the settings, the results being filled in, the
// bench namespaces (deleted at the end) and things to stop.
import { isNotFound } from '../src/kube/clients.js';
import { createNamespace, deleteNamespace, until, type TestKube } from '../test/e2e/helpers/kube.js';
import type { BenchSettings } from './env.js';
import type { Latency, Results } from './report.js';
import { rounded, summarize } from './stats.js';

/** How long a section waits for the namespace it deleted to be gone. */
const GONE_WAIT_MS = 120_000;

export class Namespaces {
  private readonly names: string[] = [];
  constructor(private readonly k: TestKube) {}

  /** A fresh `<prefix>-xxxxxx` namespace; prefixes start with `bench-`. */
  async create(prefix: string): Promise<string> {
    const ns = await createNamespace(this.k, prefix);
    this.names.push(ns);
    return ns;
  }

  /**
   * Deletes one namespace and waits until it is gone (at most GONE_WAIT_MS): the next section
   * must not run beside this one's pods being torn down (a section right after the hostile one
   * measured the attack pods' teardown too).
   */
  async delete(ns: string): Promise<void> {
    const i = this.names.indexOf(ns);
    if (i >= 0) this.names.splice(i, 1);
    await deleteNamespace(this.k, ns);
    const started = performance.now();
    const gone = (): Promise<boolean> => this.k.core.readNamespace({ name: ns }).then(() => false, isNotFound);
    await until(gone, GONE_WAIT_MS, `namespace ${ns} to be gone after its delete`).then(
      () => log(`namespace ${ns} gone ${((performance.now() - started) / 1000).toFixed(1)} s after its delete`),
      (err: unknown) => log(`${err instanceof Error ? err.message : String(err)}; the next section starts anyway`),
    );
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
