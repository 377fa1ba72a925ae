// A session call after the sandbox NetworkPolicy came back carries the kernel's network check until
// an answer shows the check ran and passed: a busy answer comes before the check (the kernel's
// server.py), so the call that runs after it must carry the check again.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { KernelNoAnswerError, type KernelConnections, type KernelResult } from '../../../src/exec/kernel.js';
import { SessionKernel } from '../../../src/sessions/kernel-call.js';
import type { SandboxSession } from '../../../src/api/v1alpha1/index.js';

const done = { status: 'ok', stdout: '', stderr: '', stdoutBytes: 0, stderrBytes: 0, truncated: false, durationMs: 1 } as KernelResult;
const busy = { ...done, status: 'error', busy: true, error: { ename: 'KernelBusy', evalue: 'another call is running', traceback: '' } } as KernelResult;
const notIsolated = { ...done, status: 'error', notIsolated: true, error: { ename: 'NotIsolated', evalue: 'network', traceback: '' } } as KernelResult;

/** A SessionKernel on `kernels`, as the session service makes it. */
function sessionKernel(kernels: KernelConnections, networkGate?: ConstructorParameters<typeof SessionKernel>[0]['networkGate']): SessionKernel {
  return new SessionKernel({
    clients: {} as never,
    kernels,
    namespace: 'ns',
    outputCapChars: 100,
    activity: {} as never,
    log: pino({ level: 'silent' }),
    ...(networkGate && { networkGate }),
  });
}

/** Two calls in turn, answered `first` then `done`; what each carried and whether the pod was marked checked. */
async function twoCalls(first: KernelResult): Promise<{ netchecks: boolean[]; shown: boolean }> {
  const answers = [first, done];
  const netchecks: boolean[] = [];
  const kernels = {
    get: () =>
      Promise.resolve({
        exec: (req: { netcheck?: boolean }) => {
          netchecks.push(req.netcheck === true);
          return Promise.resolve(answers.shift());
        },
      }),
  } as unknown as KernelConnections;
  // As NetworkPolicyGuard.inPodCheck within a minute of a restore: due until the check is confirmed.
  let shown = false;
  const networkGate = { ensure: () => Promise.resolve(), inPodCheck: () => (shown ? undefined : () => void (shown = true)) };
  const sk = sessionKernel(kernels, networkGate);
  const s = { metadata: { name: 's' }, spec: { language: 'python' } } as SandboxSession;
  for (let i = 0; i < 2; i++) await sk.send(s, 'pod', { code: 'x', timeoutMs: 1000 }, Date.now() + 1000);
  return { netchecks, shown };
}

describe('the in-pod network check of a session call', () => {
  it.each<[string, KernelResult, boolean[]]>([
    ['a call that ran confirms it: the next carries none', done, [true, false]],
    ['a busy answer (sent before the check) does not: the next carries it again', busy, [true, true]],
    ['a refusal for the network does not', notIsolated, [true, true]],
  ])('%s', async (_name, first, want) => {
    const { netchecks, shown } = await twoCalls(first);
    expect(netchecks).toEqual(want);
    expect(shown).toBe(true);
  });
});

describe("a session call's kernel stream", () => {
  it.each<[string, SandboxSession['spec']['owner'], string]>([
    ["is charged to the session owner's reading budget", { user: 'alice', groups: [] }, 'alice'],
    ['of a session without an owner, to the budget those share', undefined, ''],
  ])('%s', async (_name, owner, user) => {
    const users: unknown[] = [];
    const kernels = {
      get: (...args: unknown[]) => {
        users.push(args[4]);
        return Promise.resolve({ exec: () => Promise.resolve(done) });
      },
    } as unknown as KernelConnections;
    const sk = sessionKernel(kernels);
    const s = { metadata: { name: 's' }, spec: { language: 'python', ...(owner && { owner }) } } as SandboxSession;
    await sk.send(s, 'pod', { code: 'x', timeoutMs: 1000 }, Date.now() + 1000);
    expect(users).toEqual([user]);
  });
});

// Session code runs in the kernel (or answers a recall through a socket it bound in the kernel's
// place): a refusal for the network it forges for a call sent without the check must not have the
// call reported as never started.
describe('a refusal for the network', () => {
  it.each<[string, boolean, boolean]>([
    ['answering a call sent with the check is believed', true, true],
    ['answering a call sent without it is the call’s own error, not "did not run"', false, false],
  ])('%s', async (_name, due, believed) => {
    const kernels = { get: () => Promise.resolve({ exec: () => Promise.resolve(notIsolated) }) } as unknown as KernelConnections;
    const networkGate = { ensure: () => Promise.resolve(), inPodCheck: () => (due ? () => undefined : undefined) };
    const sk = new SessionKernel({
      clients: {} as never,
      kernels,
      namespace: 'ns',
      outputCapChars: 100,
      activity: {} as never,
      log: pino({ level: 'silent' }),
      networkGate,
    });
    const s = { metadata: { name: 's' }, spec: { language: 'python' } } as SandboxSession;
    const r = await sk.send(s, 'pod', { code: 'x', timeoutMs: 1000 }, Date.now() + 1000);
    expect(r.notIsolated === true).toBe(believed);
    expect(r).toMatchObject({ status: 'error', error: { ename: 'NotIsolated' } });
  });
});

describe('a session kernel that does not answer the ping opening its stream', () => {
  // A Node kernel reads nothing while synchronous code runs: busy (the turn asks again), nothing sent.
  // A Python kernel answers pings from a thread of its own: its silence is a failure.
  it.each<[string, 'node' | 'python', 'busy' | 'throws']>([
    ['node: busy', 'node', 'busy'],
    ['python: a failure', 'python', 'throws'],
  ])('%s', async (_name, language, want) => {
    const kernels = { get: () => Promise.reject(new KernelNoAnswerError('The session kernel did not answer within 15000 ms')) } as unknown as KernelConnections;
    const s = { metadata: { name: 's' }, spec: { language } } as SandboxSession;
    const sent = sessionKernel(kernels).send(s, 'pod', { code: 'x', timeoutMs: 1000 }, Date.now() + 1000);
    if (want === 'busy') expect(await sent).toMatchObject({ busy: true, status: 'error' });
    else await expect(sent).rejects.toBeInstanceOf(KernelNoAnswerError);
  });
});
