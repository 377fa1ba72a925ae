// A steady mix of cold, warm and session calls, driven by real MCP clients, for fault tests.
// Every call carries a unique id, and every execution is counted from INSIDE the sandbox:
// - a transient run appends to /tmp/faults-once in its pod and prints how many appends it saw, so
//   a second execution in the same pod prints "<id> 2" (a second pod is seen by the pod watch);
// - a session call appends its id to a list in the interpreter; the list is read at the end.
// - a SandboxRun with spec.session, created through the API as with kubectl (option `kube`),
//   appends its id to the same list and prints the list's length.
// Calls to a replica that vanished throw; the worker reconnects (to whichever replica is listed)
// and goes on with a NEW id, so a repeated execution is never confused with a client retry.
import { randomBytes } from 'node:crypto';
import { API_VERSION, GROUP, SANDBOXRUN_KIND, SANDBOXRUN_PLURAL, VERSION, isTerminalPhase, type SandboxRun } from '../../../../src/api/v1alpha1/index.js';
import type { TestKube } from '../../helpers/kube.js';
import { connect, type TestClient, type ToolResult } from '../../helpers/operator.js';

export interface CallRecord {
  id: string;
  /** session-run: a SandboxRun with spec.session created through the API (as with kubectl). */
  kind: 'transient' | 'session' | 'session-run';
  session?: string;
  /** The replica the call was sent to. */
  url: string;
  /** Answered (isError or not), or threw (connection lost, client timeout). */
  outcome: 'ok' | 'error' | 'threw';
  /** The run name: from structuredContent (transient), or the SandboxRun created (session-run). */
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
  /**
   * With it, one more worker creates SandboxRuns with spec.session in the mix's sessions through
   * the API server (the test's own connection, as kubectl would) and waits for each to end.
   */
  kube?: { k: TestKube; namespace: string };
}

/** How long a session-run worker follows its run before it records it as unanswered. */
const SESSION_RUN_WAIT_MS = 240_000;

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

/** Appends `id` to the interpreter's list of executed calls. */
const appendCode = (id: string): string => `import time\ntime.sleep(0.2)\ncalls = globals().get("calls", [])\ncalls.append(${JSON.stringify(id)})`;

/** A session call's code: its result is the list's length. */
const sessionCode = (id: string): string => `${appendCode(id)}\nlen(calls)`;

/** A session run's code: the list's length printed (a SandboxRun's status has no result). */
const sessionRunCode = (id: string): string => `${appendCode(id)}\nprint(len(calls))`;

/** The id a session run's code appends (sessionRunCode), or undefined. */
export const sessionRunIdOf = (code: string | undefined): string | undefined => /calls\.append\("(k-[^"]+)"\)\nprint/.exec(code ?? '')?.[1];

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

  /**
   * Creates the sessions and starts the workers; returns once each kind answered once. The
   * session-run worker has a session of its own (the last one): a session runs one call at a
   * time and the others wait for their turn, which the mix would otherwise mostly measure.
   */
  async start(): Promise<void> {
    const calling = this.o.sessions ?? 2;
    for (let i = 0; i < calling + (this.o.kube ? 1 : 0); i++) {
      const r = await (await this.client()).callTool('create_session', { language: 'python' });
      const name = String(r.structuredContent?.session ?? '');
      if (r.isError || !name) throw new Error(`create_session failed: ${detailOf(r)}`);
      this.sessions.push(name);
    }
    for (const s of this.sessions.slice(0, calling)) this.loops.push(this.loop(() => this.sessionCall(s)));
    for (let i = 0; i < (this.o.transientWorkers ?? 2); i++) this.loops.push(this.loop(() => this.transientCall()));
    const kube = this.o.kube;
    const own = this.sessions[calling];
    if (kube && own) this.loops.push(this.loop(() => this.sessionRun(kube, own)));
    await this.waitFor((r) => r.outcome === 'ok' && r.kind === 'transient', 'a first transient run');
    await this.waitFor((r) => r.outcome === 'ok' && r.kind === 'session', 'a first session call');
    if (kube) await this.waitFor((r) => r.outcome === 'ok' && r.kind === 'session-run', 'a first session run');
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
    // A test that failed before stop(): its loops end after the call each has in flight.
    this.stopping = true;
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
    await this.attempt(id, 'session', session, { session, code: sessionCode(id) }, (r) => ({
      position: Number(r.structuredContent?.result),
      // A call that failed (an exception) is answered without isError: not a success.
      ok: !r.isError && r.structuredContent?.phase === 'Succeeded',
    }));
  }

  /**
   * One SandboxRun in a session, created through the API server and followed until it ends. A
   * create that fails (the API server restarting) is recorded as thrown, and the next one gets a
   * new id: whether the failed create was stored or not, its code runs at most once.
   */
  private async sessionRun({ k, namespace }: { k: TestKube; namespace: string }, session: string): Promise<void> {
    const id = this.nextId('k');
    let run = '';
    try {
      run = (await createSessionRun(k, namespace, session, sessionRunCode(id), this.o.runTimeoutSeconds ?? RUN_TIMEOUT_SECONDS)).metadata.name;
    } catch (err) {
      this.records.push({ id, kind: 'session-run', session, url: 'api', outcome: 'threw', detail: `create: ${String(err).slice(0, 280)}` });
      await new Promise((r) => setTimeout(r, 500));
      return;
    }
    const deadline = Date.now() + SESSION_RUN_WAIT_MS;
    while (Date.now() < deadline && !this.stopping) {
      const got = (await k.custom
        .getNamespacedCustomObject({ group: GROUP, version: VERSION, plural: SANDBOXRUN_PLURAL, namespace, name: run })
        .catch(() => undefined)) as SandboxRun | undefined;
      const s = got?.status;
      if (s && isTerminalPhase(s.phase)) {
        const ok = s.phase === 'Succeeded';
        this.records.push({
          id,
          kind: 'session-run',
          session,
          url: 'api',
          run,
          outcome: ok ? 'ok' : 'error',
          ...(ok && { position: Number(s.stdout) }),
          detail: ok ? '' : `${String(s.reason ?? '')}: ${String(s.message ?? '')}`.slice(0, 400),
        });
        if (!ok) await new Promise((r) => setTimeout(r, 500));
        return;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    // The verdict still checks the run itself (terminal within its budget, never executed twice).
    this.records.push({ id, kind: 'session-run', session, url: 'api', run, outcome: 'threw', detail: 'not followed to its end (the mix stopped or gave up)' });
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

/** A python SandboxRun in `session`, created through the API server (as with kubectl). */
export async function createSessionRun(
  k: TestKube,
  namespace: string,
  session: string,
  code: string,
  timeoutSeconds: number,
  generateName = 'session-run-',
): Promise<SandboxRun> {
  const body = {
    apiVersion: API_VERSION,
    kind: SANDBOXRUN_KIND,
    metadata: { generateName },
    spec: { session, language: 'python', code, timeoutSeconds },
  };
  return (await k.custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, plural: SANDBOXRUN_PLURAL, namespace, body })) as SandboxRun;
}
