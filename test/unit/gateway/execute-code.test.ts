// execute_code through real MCP clients of both protocol eras against the real gateway over HTTP.
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { RunRequestError } from '../../../src/limits/refusal.js';
import { ExecuteCodeOutputSchema, moreMemoryAdvice } from '../../../src/gateway/tools/execute-code.js';
import { loadConfig } from '../../../src/config/index.js';
import { builtinProfile, type ResolvedProfile } from '../../../src/profiles/profile.js';
import { connectClient, outcome, sleep, startGateway, textOf } from './harness.js';
import type { ClientKind, Gateway, TestClient } from './harness.js';

interface JsonObjectSchema {
  required?: string[];
  properties: Record<string, Record<string, unknown>>;
}

const CLIENTS: ClientKind[] = ['v1 (2025-era)', 'v2 (2026-07-28)'];

describe.each(CLIENTS)('execute_code with the %s client', (kind) => {
  let gateway: Gateway;
  let client: TestClient;

  beforeAll(async () => {
    gateway = await startGateway();
  });
  afterAll(async () => {
    await gateway.close();
  });
  beforeEach(() => {
    gateway.service.behaviour = async (request) => outcome({ stdout: request.code });
  });
  afterEach(async () => {
    await client?.close();
    // No test may leak submitted code or output into the logs.
    expect(gateway.logLines.join('')).not.toContain('SECRET-CODE');
  });

  async function connect(): Promise<TestClient> {
    client = await connectClient(kind, gateway.url);
    return client;
  }

  it('negotiates the expected protocol era', async () => {
    const c = await connect();
    if (kind === 'v1 (2025-era)') expect(c.protocolVersion).toBe('2025-11-25');
    else expect([c.era, c.protocolVersion]).toEqual(['modern', '2026-07-28']);
  });

  it('lists execute_code with input schema, output schema and annotations', async () => {
    const { tools } = await (await connect()).listTools();
    expect(tools.map((t) => t.name)).toEqual(['execute_code']);
    const tool = tools[0] as unknown as {
      inputSchema: JsonObjectSchema;
      outputSchema: JsonObjectSchema;
      annotations: unknown;
    };
    expect(tool.inputSchema.required).toEqual(['code']);
    expect(tool.inputSchema.properties.language?.enum).toEqual(['python', 'bash', 'sh', 'node', 'javascript']);
    // No default in the schema: without it a session call runs in the session's language.
    expect(tool.inputSchema.properties.language?.default).toBeUndefined();
    expect(tool.inputSchema.properties.timeout_seconds).toMatchObject({ minimum: 1, maximum: 600 });
    expect(tool.inputSchema.properties.timeout_seconds?.description).toContain('default 30');
    expect(tool.inputSchema.properties.code?.maxLength).toBe(1000);
    expect(tool.outputSchema.required).toEqual(expect.arrayContaining(['namespace', 'phase', 'truncated']));
    expect(tool.outputSchema.properties).toHaveProperty('run');
    expect(tool.outputSchema.properties).toHaveProperty('session');
    expect(Object.keys(tool.outputSchema.properties)).toContain('exit_code');
    expect(tool.annotations).toEqual({
      title: 'Execute code',
      readOnlyHint: false,
      destructiveHint: false,
      idempotentHint: false,
      openWorldHint: false,
    });
  });

  it('returns stdout as text and a structuredContent valid against the output schema', async () => {
    const result = await (await connect()).callTool({ code: 'print("SECRET-CODE")' });
    expect(result.isError ?? false).toBe(false);
    expect(textOf(result)).toBe('stdout:\nprint("SECRET-CODE")\n\nexit code: 0');
    const structured = ExecuteCodeOutputSchema.parse(result.structuredContent);
    expect(structured).toEqual({
      run: 'run-abc12',
      namespace: 'codemode',
      phase: 'Succeeded',
      exit_code: 0,
      stdout: 'print("SECRET-CODE")',
      truncated: false,
      duration_ms: 42,
    });
    const call = gateway.service.calls.at(-1);
    expect(call?.request).toEqual({ language: 'python', code: 'print("SECRET-CODE")', timeoutSeconds: 30 });
  });

  it('reports a non-zero exit as a normal result, not a tool error', async () => {
    gateway.service.behaviour = async () => outcome({ phase: 'Failed', reason: 'NonZeroExit', exitCode: 3, stdout: 'partial\n', stderr: 'boom\n' });
    const result = await (await connect()).callTool({ code: 'exit 3', language: 'bash' });
    expect(result.isError ?? false).toBe(false);
    expect(textOf(result)).toBe('stdout:\npartial\n\nstderr:\nboom\n\nexit code: 3');
    expect(result.structuredContent).toMatchObject({ phase: 'Failed', exit_code: 3, stderr: 'boom\n' });
  });

  it('reports a time-out as a tool error with a hint naming the limits', async () => {
    gateway.service.behaviour = async () => outcome({ phase: 'TimedOut', reason: 'DeadlineExceeded', exitCode: undefined, stdout: 'tick\n' });
    const result = await (await connect()).callTool({ code: 'while True: pass', timeout_seconds: 5 });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toBe('The run exceeded timeout_seconds=5; make the code faster or raise timeout_seconds (max 600).\n\nstdout:\ntick');
    expect(ExecuteCodeOutputSchema.parse(result.structuredContent).phase).toBe('TimedOut');
    expect(gateway.service.calls.at(-1)?.request.timeoutSeconds).toBe(5);
  });

  const advice = 'Use less memory: process data in smaller pieces instead of loading it all at once.';
  it.each([
    ['no message', {}, `The run was killed because it ran out of memory (OOMKilled). ${advice}`],
    [
      "a run: the message's diagnosis, not its SandboxRun field",
      {
        message:
          'The program used more memory than its limit (512Mi) and was killed; files in /tmp count as memory. Use less memory (or delete files) or request more with resources.memory (maximum 2Gi).',
      },
      `The run was killed because it ran out of memory (OOMKilled). The program used more memory than its limit (512Mi) and was killed; files in /tmp count as memory. ${advice}`,
    ],
    [
      "a session call: the whole message (the session's fate)",
      {
        session: 's1',
        message: "The session's interpreter used more memory than its limit (512Mi) and was killed. The session is lost with its state: create a new session.",
      },
      "The run was killed because it ran out of memory (OOMKilled). The session's interpreter used more memory than its limit (512Mi) and was killed. The session is lost with its state: create a new session.",
    ],
  ])('reports an OOM kill as a tool error with a hint: %s', async (_n, extra, text) => {
    gateway.service.behaviour = async () => outcome({ phase: 'Failed', reason: 'OOMKilled', exitCode: 137, ...extra });
    const result = await (await connect()).callTool({ code: 'x = "a" * 10**12' });
    expect(result.isError).toBe(true);
    expect(textOf(result).split('\n')[0]).toBe(text);
    // structuredContent says the same, never the SandboxRun field the tool does not have.
    const told = ExecuteCodeOutputSchema.parse(result.structuredContent).message;
    expect(`The run was killed because it ran out of memory (OOMKilled). ${told ?? ''}`.trimEnd()).toBe(text);
    expect(told ?? '').not.toContain('resources.memory');
  });

  it('reports every call to the metrics sink: ok for a result, error for a tool error', async () => {
    const c = await connect();
    const before = gateway.toolCalls.length;
    await c.callTool({ code: 'exit 3', language: 'bash' }); // a non-zero exit is still a result
    gateway.service.behaviour = async () => outcome({ phase: 'Failed', reason: 'OOMKilled', exitCode: 137 });
    await c.callTool({ code: 'x = "a" * 10**12' });
    gateway.service.behaviour = async () => {
      throw new Error('unexpected');
    };
    await c.callTool({ code: 'print(1)' });
    const calls = gateway.toolCalls.slice(before);
    expect(calls.map(({ tool, outcome: o }) => [tool, o])).toEqual([
      ['execute_code', 'ok'],
      ['execute_code', 'error'],
      ['execute_code', 'error'],
    ]);
    expect(calls.every((call) => call.seconds >= 0 && call.seconds < 60)).toBe(true);
  });

  it('refuses code over the byte limit with the limit and the actual size', async () => {
    const before = gateway.service.calls.length;
    // 600 characters, 1200 bytes: under maxLength, over the byte limit.
    const result = await (await connect()).callTool({ code: 'é'.repeat(600) });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toContain('code is 1200 bytes (UTF-8); the limit is 1000 bytes');
    expect(gateway.service.calls.length).toBe(before);
  });

  it('refuses an unknown language with the accepted values', async () => {
    const result = await (await connect()).callTool({ code: 'puts 1', language: 'ruby' });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(/language.*python.*bash.*sh.*node.*javascript/);
  });

  it('turns a RunRequestError into a tool error with its hint', async () => {
    gateway.service.behaviour = async () => {
      throw new RunRequestError('The namespace quota of runs is used up.', 'Wait for running runs to finish.');
    };
    const result = await (await connect()).callTool({ code: 'print(1)' });
    expect(result).toMatchObject({ isError: true });
    expect(textOf(result)).toBe('The namespace quota of runs is used up.\nWait for running runs to finish.');
  });

  it('tells the caller, not the logs, a refusal that quotes the sandbox (a session call)', async () => {
    gateway.service.behaviour = async () => {
      throw new RunRequestError('Session s1 was lost: the kernel rejected the stream: SANDBOX-TEXT.', 'Create a new session.', true);
    };
    const result = await (await connect()).callTool({ code: 'print(1)' });
    expect(textOf(result)).toContain('SANDBOX-TEXT');
    expect(gateway.logLines.some((l) => l.includes('Refused run request'))).toBe(true);
    expect(gateway.logLines.join('')).not.toContain('SANDBOX-TEXT');
  });

  it('hides unexpected errors behind a generic sentence and logs them', async () => {
    gateway.service.behaviour = async () => {
      throw new Error('etcd exploded at 0xdeadbeef');
    };
    const result = await (await connect()).callTool({ code: 'print(1)' });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(/internal error in codemode-operator/);
    expect(textOf(result)).not.toContain('etcd');
    expect(gateway.logLines.some((l) => l.includes('Failed to execute run') && l.includes('etcd exploded'))).toBe(true);
  });

  it('streams output as progress notifications that arrive before the result', async () => {
    gateway.service.behaviour = async (_request, { onOutput }) => {
      for (const text of ['one\n', 'two\n']) {
        onOutput?.({ stream: 'stdout', text });
        await sleep(120); // longer than the coalescing window: one notification each
      }
      onOutput?.({ stream: 'stderr', text: 'warn\n' });
      await sleep(120);
      return outcome({ stdout: 'one\ntwo\n', stderr: 'warn\n' });
    };
    const messages: Array<string | undefined> = [];
    const result = await (await connect()).callTool({ code: 'print(1)' }, (m) => messages.push(m));
    const seenBeforeResult = [...messages];
    expect(seenBeforeResult).toEqual(['one\n', 'two\n', 'stderr: warn\n']);
    expect(result.isError ?? false).toBe(false);
  });

  it('coalesces a burst of chunks into one notification and flushes it before the result', async () => {
    gateway.service.behaviour = async (_request, { onOutput }) => {
      for (let i = 0; i < 50; i++) onOutput?.({ stream: 'stdout', text: `${i},` });
      return outcome(); // returns inside the coalescing window: close() must flush
    };
    const messages: Array<string | undefined> = [];
    await (await connect()).callTool({ code: 'print(1)' }, (m) => messages.push(m));
    expect(messages).toEqual([Array.from({ length: 50 }, (_, i) => `${i},`).join('')]);
  });

  it('sends no progress when the client did not ask for it', async () => {
    gateway.service.behaviour = async (_request, { onOutput }) => {
      expect(onOutput).toBeUndefined();
      return outcome();
    };
    const result = await (await connect()).callTool({ code: 'print(1)' });
    expect(result.isError ?? false).toBe(false);
  });

  it('keeps the run going when the client disconnects mid-call', async () => {
    let started!: () => void;
    const hasStarted = new Promise<void>((resolve) => (started = resolve));
    gateway.service.behaviour = async (_request, { onOutput }) => {
      started();
      onOutput?.({ stream: 'stdout', text: 'working\n' });
      await sleep(400); // the run ignores the caller going away, as the contract requires
      onOutput?.({ stream: 'stdout', text: 'done\n' });
      return outcome({ stdout: 'working\ndone\n' });
    };
    const c = await connect();
    const pending = c.callTool({ code: 'SECRET-CODE' }, () => undefined).catch((err: unknown) => err);
    await hasStarted;
    await c.close();
    await pending;
    const call = gateway.service.calls.at(-1)!;
    await expect.poll(() => call.options.signal?.aborted).toBe(true);
    expect(await call.finished).toMatchObject({ phase: 'Succeeded', stdout: 'working\ndone\n' });
    // The gateway is still healthy afterwards.
    gateway.service.behaviour = async (request) => outcome({ stdout: request.code });
    const again = await (await connect()).callTool({ code: 'after' });
    expect(textOf(again)).toContain('after');
  });

  it('stops waiting quietly when the service gives up on a caller that went away', async () => {
    let started!: () => void;
    const hasStarted = new Promise<void>((resolve) => (started = resolve));
    gateway.service.behaviour = (_request, { signal }) =>
      new Promise((_resolve, reject) => {
        started();
        signal?.addEventListener('abort', () => reject(new Error('stopped waiting')));
      });
    const c = await connect();
    const logsBefore = gateway.logLines.length;
    const newLogs = (): string[] => gateway.logLines.slice(logsBefore);
    const pending = c.callTool({ code: 'print(1)' }).catch((err: unknown) => err);
    await hasStarted;
    await c.close();
    await pending;
    await expect.poll(() => newLogs().some((l) => l.includes('the client went away'))).toBe(true);
    expect(newLogs().some((l) => l.includes('Failed to execute run'))).toBe(false);
  });
});

describe('execute_code after an OOM kill, with profiles that have more memory', () => {
  const config = loadConfig({});
  const profile = (name: string, memory: string): ResolvedProfile => {
    const p = builtinProfile(config);
    return { ...p, name, builtin: false, shape: { ...p.shape, defaultMemory: memory } };
  };
  // The built-in profile has the gateway's default memory (512Mi); two have more, one less.
  const all = [builtinProfile(config), profile('datascience', '2Gi'), profile('big', '1Gi'), profile('tiny', '128Mi')];
  const profiles = {
    all: () => all,
    resolve: (name?: string) => all.find((p) => p.name === (name ?? config.defaultProfile)) ?? { message: `Unknown profile ${name}.`, hint: '' },
  };
  let gateway: Gateway;
  let client: TestClient | undefined;
  beforeAll(async () => {
    gateway = await startGateway({}, undefined, { profiles });
  });
  afterAll(async () => {
    await client?.close();
    await gateway.close();
  });
  const runMessage =
    'The program used more memory than its limit (512Mi) and was killed; files in /tmp count as memory. Use less memory (or delete files) or request more with resources.memory (maximum 2Gi).';

  it.each([
    [
      'a run of the default profile: the two with more, smallest first',
      { message: runMessage },
      {},
      'The program used more memory than its limit (512Mi) and was killed; files in /tmp count as memory. Use less memory: process data in smaller pieces instead of loading it all at once. Or run it with a profile that has more: big (1Gi), datascience (2Gi).',
    ],
    [
      'a run of the profile with the most: none named',
      { message: runMessage.replace('512Mi', '2Gi') },
      { profile: 'datascience' },
      'The program used more memory than its limit (2Gi) and was killed; files in /tmp count as memory. Use less memory: process data in smaller pieces instead of loading it all at once.',
    ],
    [
      "a session call at its pod's limit: the profiles for the new session",
      {
        session: 's1',
        memoryLimit: '1Gi',
        message: "The session's interpreter used more memory than its limit (1Gi) and was killed. The session is lost with its state: create a new session.",
      },
      { session: 's1' },
      "The session's interpreter used more memory than its limit (1Gi) and was killed. The session is lost with its state: create a new session. Or create the new session with a profile that has more: datascience (2Gi).",
    ],
    [
      'a session call whose limit is not known: none named',
      {
        session: 's1',
        message: "The session's interpreter used more memory than its limit and was killed. The session is lost with its state: create a new session.",
      },
      { session: 's1' },
      "The session's interpreter used more memory than its limit and was killed. The session is lost with its state: create a new session.",
    ],
  ])('%s', async (_n, extra, args, message) => {
    gateway.service.behaviour = async () => outcome({ phase: 'Failed', reason: 'OOMKilled', exitCode: 137, ...extra });
    client = await connectClient('v2 (2026-07-28)', gateway.url);
    const result = await client.callTool({ code: 'x = "a" * 10**12', ...args });
    expect(result.isError).toBe(true);
    expect(textOf(result).split('\n')[0]).toBe(`The run was killed because it ran out of memory (OOMKilled). ${message}`);
    expect(ExecuteCodeOutputSchema.parse(result.structuredContent).message).toBe(message);
    await client.close();
    client = undefined;
  });
});

describe('moreMemoryAdvice', () => {
  const config = loadConfig({});
  const p = (name: string, memory: string): ResolvedProfile => {
    const b = builtinProfile(config);
    return { ...b, name, shape: { ...b.shape, defaultMemory: memory } };
  };
  const six = ['a', 'b', 'c', 'd', 'e', 'f'].map((n, i) => p(n, `${i + 1}Gi`));
  it.each([
    ['no limit known', [p('x', '2Gi')], undefined, false, ''],
    ['a limit that is not a quantity', [p('x', '2Gi')], '1e', false, ''],
    ['none with more', [p('x', '512Mi'), p('y', '256Mi')], '512Mi', false, ''],
    ['equal is not more', [p('x', '536870912')], '512Mi', false, ''],
    ['units compared, not text', [p('x', '1G'), p('y', '600Mi')], '512Mi', false, ' Or run it with a profile that has more: y (600Mi), x (1G).'],
    ['a session', [p('x', '1Gi')], '512Mi', true, ' Or create the new session with a profile that has more: x (1Gi).'],
    ['at most five, the smallest', six, '512Mi', false, ' Or run it with a profile that has more: a (1Gi), b (2Gi), c (3Gi), d (4Gi), e (5Gi).'],
  ])('%s', (_n, profiles, limit, session, text) => {
    expect(moreMemoryAdvice(profiles, limit, session)).toBe(text);
  });
});
