// A steady mix of cold, warm and session calls, driven by real MCP clients, for fault tests.
// Every call carries a unique id, and every execution is counted from INSIDE the sandbox:
// - a transient run appends to /tmp/faults-once in its pod and prints how many appends it saw, so
//   a second execution in the same pod prints "<id> 2" (a second pod is seen by the pod watch);
// - a session call appends its id to a list in the interpreter; the list is read at the end.
// Calls to a replica that vanished throw; the worker reconnects (to whichever replica is listed)
// and goes on with a NEW id, so a repeated execution is never confused with a client retry.
import { randomBytes } from 'node:crypto';
import { connect, type TestClient, type ToolResult } from '../../helpers/operator.js';

export interface CallRecord {
  id: string;
  kind: 'transient' | 'session';
  session?: string;
  /** The replica the call was sent to. */
  url: string;
  /** Answered (isError or not), or threw (connection lost, client timeout). */
  outcome: 'ok' | 'error' | 'threw';
  /** The run name (transient) from structuredContent. */
  run?: string;
  /** For session calls that answered: the length of the list right after the append. */
  position?: number;
  /** What the caller saw: reason + message, or the thrown error (bounded). */
  detail: string;
}

export interface MixOptions {
  /** The replicas to send calls to now (the test changes it as replicas come and go). */
  urls: () => string[];
  transientWorkers?: number;
  sessions?: number;
  /** How long each transient run's code sleeps, so runs are in flight when the fault hits. */
  runSleepSeconds?: number;
  runTimeoutSeconds?: number;
}

export const RUN_TIMEOUT_SECONDS = 10;

export function transientCode(id: string, sleepSeconds: number): string {
  return [
    'import os, time',
    "p = '/tmp/faults-once'",
    'n = os.path.getsize(p) if os.path.exists(p) else 0',
    "open(p, 'a').write('x')",
    `time.sleep(${sleepSeconds})`,
    `print(${JSON.stringify(id)}, n + 1)`,
  ].join('\n');
}

const sessionCode = (id: string): string => `import time\ntime.sleep(0.2)\ncalls = globals().get("calls", [])\ncalls.append(${JSON.stringify(id)})\nlen(calls)`;

const detailOf = (r: ToolResult): string => {
  const s = r.structuredContent ?? {};
  const text = r.content.map((c) => c.text ?? '').join(' ');
  return `${String(s.reason ?? '')}: ${String(s.message ?? text)}`.slice(0, 400);
};

export class Mix {
  readonly records: CallRecord[] = [];
  readonly sessions: string[] = [];
  private stopping = false;
  private loops: Promise<void>[] = [];
  private readonly clients = new Map<string, Promise<TestClient>>();
  private rr = 0;
  private seq = 0;

  constructor(private readonly o: MixOptions) {}

  /** Creates the sessions and starts the workers; returns once each kind answered once. */
  async start(): Promise<void> {
    for (let i = 0; i < (this.o.sessions ?? 2); i++) {
      const r = await (await this.client()).callTool('create_session', { language: 'python' });
      const name = String(r.structuredContent?.session ?? '');
      if (r.isError || !name) throw new Error(`create_session failed: ${detailOf(r)}`);
      this.sessions.push(name);
    }
    for (const s of this.sessions) this.loops.push(this.loop(() => this.sessionCall(s)));
    for (let i = 0; i < (this.o.transientWorkers ?? 2); i++) this.loops.push(this.loop(() => this.transientCall()));
    await this.waitFor((r) => r.outcome === 'ok' && r.kind === 'transient', 'a first transient run');
    await this.waitFor((r) => r.outcome === 'ok' && r.kind === 'session', 'a first session call');
  }

  /** Waits (bounded) until a call that starts from now on matches, e.g. "the system recovered". */
  async waitFor(match: (r: CallRecord) => boolean, what: string, timeoutMs = 180_000): Promise<void> {
    const from = this.records.length;
    const deadline = Date.now() + timeoutMs;
    while (!this.records.slice(from).some(match)) {
      if (Date.now() > deadline) throw new Error(`mix: no ${what} within ${timeoutMs} ms; last calls: ${JSON.stringify(this.records.slice(-6))}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  /** Calls sent and not answered yet. */
  inFlight(): number {
    return this.pending;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.loops);
  }

  /** Reads each session's list of executed call ids (undefined: the session did not survive). */
  async sessionLists(): Promise<Map<string, string[] | undefined>> {
    const out = new Map<string, string[] | undefined>();
    for (const s of this.sessions) {
      try {
        const r = await (await this.client()).callTool('execute_code', { session: s, code: 'import json\nprint(json.dumps(globals().get("calls", [])))' });
        out.set(s, r.isError ? undefined : (JSON.parse(String(r.structuredContent?.stdout ?? 'null')) as string[]));
      } catch {
        out.set(s, undefined);
      }
    }
    return out;
  }

  async close(): Promise<void> {
    for (const s of this.sessions) await (await this.client()).callTool('close_session', { session: s }).catch(() => undefined);
    for (const c of this.clients.values()) await c.then((x) => x.close()).catch(() => undefined);
  }

  private pending = 0;

  private async loop(call: () => Promise<void>): Promise<void> {
    while (!this.stopping) {
      this.pending++;
      try {
        await call();
      } finally {
        this.pending--;
      }
    }
  }

  private nextId(kind: string): string {
    return `${kind}-${++this.seq}-${randomBytes(3).toString('hex')}`;
  }

  private async transientCall(): Promise<void> {
    const id = this.nextId('t');
    const code = transientCode(id, this.o.runSleepSeconds ?? 1);
    await this.attempt(id, 'transient', undefined, { code, timeout_seconds: this.o.runTimeoutSeconds ?? RUN_TIMEOUT_SECONDS }, (r) => ({
      run: String(r.structuredContent?.run ?? ''),
      ok: !r.isError && r.structuredContent?.stdout === `${id} 1\n`,
    }));
  }

  private async sessionCall(session: string): Promise<void> {
    const id = this.nextId('s');
    await this.attempt(id, 'session', session, { session, code: sessionCode(id) }, (r) => ({ position: Number(r.structuredContent?.result), ok: !r.isError }));
  }

  private async attempt(
    id: string,
    kind: CallRecord['kind'],
    session: string | undefined,
    args: Record<string, unknown>,
    read: (r: ToolResult) => { ok: boolean; run?: string; position?: number },
  ): Promise<void> {
    let url = '';
    try {
      url = this.pickUrl();
      const r = await (await this.client(url)).callTool('execute_code', args);
      const { ok, ...rest } = read(r);
      // An answer that is neither an error nor the expected output is a wrong answer: kept as 'error'
      // with what came back, and the verdict fails on it.
      this.records.push({
        id,
        kind,
        ...(session && { session }),
        url,
        outcome: ok ? 'ok' : 'error',
        ...rest,
        detail: ok ? '' : r.isError ? detailOf(r) : `WRONG ANSWER ${JSON.stringify(r.structuredContent).slice(0, 300)}`,
      });
      // A failing replica answers at once: don't spin (a real client backs off too).
      if (!ok) await new Promise((res) => setTimeout(res, 500));
    } catch (err) {
      this.clients.delete(url);
      this.records.push({ id, kind, ...(session && { session }), url, outcome: 'threw', detail: String(err).slice(0, 300) });
      await new Promise((r) => setTimeout(r, 500));
    }
  }

  private pickUrl(): string {
    const urls = this.o.urls();
    if (urls.length === 0) throw new Error('mix: no replica to call');
    return urls[this.rr++ % urls.length] as string;
  }

  private client(url = this.pickUrl()): Promise<TestClient> {
    let c = this.clients.get(url);
    if (!c) {
      c = connect(url, 'current');
      c.catch(() => this.clients.delete(url));
      this.clients.set(url, c);
    }
    return c;
  }
}
