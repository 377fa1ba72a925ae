// One call in a session's interpreter, over its kernel's exec stream: the stream opened (waiting
// out an API server or kubelet that cannot be reached for a while), the sandbox NetworkPolicy
// checked, the code sent once under its key, its outcome read back over a new stream when the
// stream broke; and a failure told apart: the code did not run, it may have run (the session keeps
// its state), or the session is lost. Everything read from the pod is untrusted and already bounded
// by the exec layer.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { kernelLanguage, type SandboxSession } from '../api/v1alpha1/index.js';
import {
  KernelConnectionError,
  KernelNoAnswerError,
  KernelProtocolError,
  KernelUnreachableError,
  type CallHandler,
  type KernelConnection,
  type KernelConnections,
  type KernelResult,
} from '../exec/kernel.js';
import { passedNetcheck } from '../exec/frames.js';
import type { OutputListener } from '../exec/kernel-stream.js';
import { untilOpened } from '../exec/open-wait.js';
import { readingUser } from '../exec/read-budget.js';
import { RECALL_AFTER_BREAK_GRACE_MS, recallAfterBreak, type RecallTarget, type StreamBreakOutcome } from '../exec/recall.js';
import type { KubeClients } from '../kube/clients.js';
import { OPEN_WAIT_MS } from '../sandbox/deadlines.js';
import { SANDBOX_CONTAINER } from '../sandbox/pod.js';
import { isNetworkError } from '../util/network-error.js';
import type { SessionActivity } from './activity.js';
import { SessionError } from './errors.js';
import { NO_OUTPUT, lostTo, readPodState } from './verdict.js';

/** What the kernel is sent. */
export interface KernelRequest {
  code: string;
  timeoutMs: number;
  stdin?: string;
  /** The key the kernel keeps the result under (a random one by default). */
  key?: string;
  onCall?: CallHandler;
}

export interface SessionKernelDeps {
  clients: KubeClients;
  kernels: KernelConnections;
  namespace: string;
  outputCapChars: number;
  activity: SessionActivity;
  log: Logger;
  /** The sandbox NetworkPolicy gate: no session code starts while the policy is missing. */
  networkGate?: { ensure(namespace: string): Promise<void>; inPodCheck(namespace: string, pod: string): (() => void) | undefined } | undefined;
  /** Told when a call's stream broke after its code was sent, and whether its outcome was read back (metrics). */
  onStreamBroke?: ((outcome: StreamBreakOutcome) => void) | undefined;
  /**
   * Whether the session `s` no longer exists as the API server has it (deleted, being deleted, or
   * another object of its name): its pod went with it. Rejects when that cannot be read.
   */
  sessionDeleted?: ((s: SandboxSession) => Promise<boolean>) | undefined;
}

/**
 * Whether `err`, from opening a stream to session `s`'s kernel, is the silence of a Node kernel
 * running synchronous code: it reads its socket only between such stretches (runtime/PROTOCOL.md,
 * `ping`), so a ping that waited out its time says the kernel is busy, not that it is gone.
 */
function busySilence(s: SandboxSession, err: unknown): boolean {
  return err instanceof KernelNoAnswerError && kernelLanguage(s.spec.language) === 'node';
}

/** A busy answer for a call whose stream could not open because the Node kernel is busy (busySilence): the turn waits and asks again. */
const NOT_ANSWERING_BUSY: KernelResult = {
  status: 'error',
  ...NO_OUTPUT,
  error: { ename: 'KernelBusy', evalue: 'the kernel did not answer: it is running synchronous code', traceback: '' },
  busy: true,
};

/** Whether `r` is the busy answer of a Node kernel that did not answer at all (NOT_ANSWERING_BUSY). */
export function notAnswering(r: KernelResult): boolean {
  return r === NOT_ANSWERING_BUSY;
}

export class SessionKernel {
  constructor(private readonly d: SessionKernelDeps) {}

  /**
   * Sends `req` to the kernel of session `s` (its pod `pod`), during the call's turn. `openUntil`:
   * until when (ms since the epoch) the stream may be waited for while it cannot be reached (at most
   * OPEN_WAIT_MS); `signal`: the caller went away, so no more waiting.
   */
  async send(s: SandboxSession, pod: string, req: KernelRequest, openUntil: number, signal?: AbortSignal, onOutput?: OutputListener): Promise<KernelResult> {
    const ns = this.d.namespace;
    // Nothing of the call has been sent while its stream is opened, so waiting cannot run it twice.
    let conn: KernelConnection;
    try {
      conn = await untilOpened(() => this.d.kernels.get(ns, pod, SANDBOX_CONTAINER, kernelLanguage(s.spec.language), readingUser(s.spec.owner)), {
        maxMs: Math.min(OPEN_WAIT_MS, openUntil - Date.now()),
        retryable: (err) => err instanceof KernelUnreachableError && !signal?.aborted,
      });
    } catch (err) {
      // A Node kernel running synchronous code (another replica's call) does not even answer the
      // ping that opens a stream: nothing of this call was sent, and the session is busy, not gone.
      if (busySilence(s, err)) return NOT_ANSWERING_BUSY;
      throw err;
    }
    // As late as possible: no session code starts while the sandbox NetworkPolicy is missing.
    await this.d.networkGate?.ensure(ns).catch((err: unknown) => {
      throw new SessionError((err as Error).message, 'The session is intact; call again in a moment.');
    });
    // Soon after the policy came back: the kernel first checks that the pod has no network.
    const checked = this.d.networkGate?.inPodCheck(ns, pod);
    const key = req.key ?? randomUUID();
    const sentAt = performance.now();
    const { onCall, ...sent } = req;
    let r: KernelResult;
    try {
      r = await conn.exec({ ...sent, capChars: this.d.outputCapChars, key, ...(checked && { netcheck: true }) }, onOutput, onCall);
    } catch (err) {
      // The stream broke after the call was sent (an API server or kubelet restart, a network
      // break): the kernel runs the code to its end all the same and keeps its result, so it is
      // read back over a new stream rather than the outcome reported as unknown. The call keeps
      // its turn meanwhile. Not a pod that broke the protocol: that session is lost.
      if (!(err instanceof KernelConnectionError) || err instanceof KernelProtocolError) throw err;
      // The code's tool calls go on over the new stream.
      const again = await recallAfterBreak(this.recallTarget(s, pod, key, onCall), sentAt + req.timeoutMs + RECALL_AFTER_BREAK_GRACE_MS);
      this.d.onStreamBroke?.(again ? 'recalled' : 'unknown');
      if (!again) throw err;
      this.d.log.info({ sandboxsession: s.metadata.name }, 'Read back a call whose exec stream broke');
      r = again;
    }
    if (passedNetcheck(r)) checked?.();
    // Only a call sent with netcheck can have been refused for the network. Session code runs in
    // the kernel (or answers a recall through a socket of its own) and could otherwise have a call
    // it ran reported as never started; unasked, the answer is the call's own error result.
    if (r.notIsolated && !checked) {
      const { notIsolated: _unasked, ...own } = r;
      r = own;
    }
    return r;
  }

  /**
   * What a call whose stream failed (`err`, a KernelConnectionError) tells its caller: thrown as a
   * SessionError when the session lives on (the code did not run, or may have), or the session's
   * loss, recorded, then returned as the call's outcome when the pod's status says why it ended.
   */
  async failed(s: SandboxSession, pod: string, err: KernelConnectionError): Promise<ReturnType<typeof lostTo>> {
    const ns = this.d.namespace;
    const name = s.metadata.name;
    this.d.kernels.drop(ns, pod);
    // A breach is the sandbox's doing (its own code wrote to the kernel's stream): say so. An OOM
    // kill of the interpreter or an eviction of its pod ends the stream too: the pod's status
    // says which, and the caller gets that as the call's outcome.
    const breach = err instanceof KernelProtocolError;
    const seen = breach ? undefined : await readPodState(this.d.clients, ns, pod);
    const verdict = seen?.failure;
    // A broken connection is not a dead kernel: when the API server was unreachable, or a fresh
    // stream finds the kernel answering, the session keeps its state and is not marked lost.
    if (!breach && !seen?.stopped) {
      if (err instanceof KernelUnreachableError)
        throw new SessionError(
          `Session ${name} could not be reached: ${err.message}. The code did not run; the session keeps its state.`,
          'Call again in a moment.',
        );
      if ((await this.probe(s, pod)) !== 'gone') {
        throw new SessionError(
          `The connection to session ${name} broke during the call: ${err.message}. The session keeps its state, but whether this call ran is unknown.`,
          'Check the state this call would change before running it again.',
          { mayHaveRun: true },
        );
      }
    }
    // Closed (close_session, kubectl) or collected at its maximum lifetime during the call: its
    // pod was deleted with it, which is not an interpreter that died. Nothing to mark: it is gone.
    if (!breach && !verdict && (await this.d.sessionDeleted?.(s).catch(() => false))) {
      throw new SessionError(
        `Session ${name} was deleted during this call (closed with close_session or kubectl, or past its maximum lifetime), and its pod with it: its state is gone, and whether this call ran to its end is unknown.`,
        'Create a new session with create_session and run the setup again.',
        { mayHaveRun: true },
      );
    }
    await this.d.activity.markLost(s, breach ? `the session was stopped because ${err.message}` : verdict ? verdict.detail.replace(/\.$/, '') : err.message);
    if (verdict) return lostTo(verdict, name, this.d.outputCapChars);
    throw new SessionError(
      `Session ${name} was lost: ${err.message}. Its state is gone.`,
      'Create a new session with create_session and run the setup again.',
      {
        mayHaveRun: true,
      },
    );
  }

  /**
   * The session's kernel, asked for the call sent with `key`; the pod's status says when it stopped.
   * `onCall`: the call's tool calls, when this replica still serves it.
   */
  recallTarget(s: SandboxSession, pod: string, key: string, onCall?: CallHandler): RecallTarget {
    return {
      ...(onCall && { onCall }),
      connect: () => this.d.kernels.get(this.d.namespace, pod, SANDBOX_CONTAINER, kernelLanguage(s.spec.language), readingUser(s.spec.owner)),
      key,
      capChars: this.d.outputCapChars,
      stopped: async () => (await readPodState(this.d.clients, this.d.namespace, pod, 0)).stopped,
    };
  }

  /** After a broken stream: does a fresh one reach a kernel that answers? */
  private async probe(s: SandboxSession, pod: string): Promise<'alive' | 'unreachable' | 'gone'> {
    try {
      await this.d.kernels.get(this.d.namespace, pod, SANDBOX_CONTAINER, kernelLanguage(s.spec.language), readingUser(s.spec.owner));
      return 'alive';
    } catch (err) {
      this.d.kernels.drop(this.d.namespace, pod);
      return err instanceof KernelUnreachableError || isNetworkError(err) || busySilence(s, err) ? 'unreachable' : 'gone';
    }
  }
}
