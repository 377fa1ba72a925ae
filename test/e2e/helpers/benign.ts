// A benign neighbour for the hostile suite: while an attack runs, another client keeps calling in
// its own session (and, optionally, transient runs) and checks every answer. An attack passes only
// if the neighbour's calls all stayed correct and the gateway (this test process) never died.
import { connect, type TestClient } from './operator.js';

export interface BenignReport {
  calls: number;
  /** Calls whose answer was wrong or an error, with what came back (never empty-handed). */
  failures: string[];
  latenciesMs: number[];
}

export interface BenignNeighbour {
  /** Stops the loop after the call in flight and reports every call made. */
  stop(): Promise<BenignReport>;
}

/**
 * Starts calling `url` in a loop: a python session call that must return the next value of a
 * counter kept in the session (so a lost or repeated call shows), and every `runEvery`-th
 * iteration a transient run when `runEvery` > 0. Waits for the first call before returning, so
 * the attack starts against a working neighbour.
 */
export async function startBenignNeighbour(url: string, options: { runEvery?: number; pauseMs?: number } = {}): Promise<BenignNeighbour> {
  const client: TestClient = await connect(url, 'current');
  const created = await client.callTool('create_session', { language: 'python' });
  const session = String(created.structuredContent?.session ?? '');
  if (created.isError || !session) throw new Error(`benign neighbour: create_session failed: ${JSON.stringify(created.content)}`);
  const report: BenignReport = { calls: 0, failures: [], latenciesMs: [] };
  let expected = 0;
  const once = async (): Promise<void> => {
    const t0 = performance.now();
    const r = await client.callTool('execute_code', { session, code: 'n = globals().get("n", 0) + 1\nn' });
    report.latenciesMs.push(performance.now() - t0);
    report.calls++;
    expected++;
    const got = r.structuredContent?.result;
    if (r.isError || got !== String(expected))
      report.failures.push(`session call ${expected}: ${JSON.stringify(r.structuredContent ?? r.content).slice(0, 300)}`);
    if (options.runEvery && report.calls % options.runEvery === 0) {
      const t1 = performance.now();
      const t = await client.callTool('execute_code', { code: 'print(6 * 7)' });
      report.latenciesMs.push(performance.now() - t1);
      report.calls++;
      if (t.isError || t.structuredContent?.stdout !== '42\n')
        report.failures.push(`transient run: ${JSON.stringify(t.structuredContent ?? t.content).slice(0, 300)}`);
    }
  };
  await once();
  let stopping = false;
  const loop = (async (): Promise<void> => {
    while (!stopping) {
      try {
        await once();
      } catch (err) {
        report.failures.push(`call threw: ${String(err).slice(0, 300)}`);
      }
      if (options.pauseMs) await new Promise((r) => setTimeout(r, options.pauseMs));
    }
  })();
  return {
    async stop(): Promise<BenignReport> {
      stopping = true;
      await loop;
      await client.callTool('close_session', { session }).catch(() => undefined);
      await client.close();
      return report;
    },
  };
}
