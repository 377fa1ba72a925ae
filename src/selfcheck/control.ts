// The control half of the network check, from the operator process: a client that is not a
// sandbox must be able to exchange data with the echo listener (and the gateway with itself),
// otherwise the canary's silence proves nothing.
import { connect } from 'node:net';
import { ECHO_GREETING, ECHO_PORT } from './echo-pod.js';

/** One TCP exchange with the echo listener: true when its greeting came back. */
export function echoAnswers(host: string, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    let got = '';
    const sock = connect({ host, port: ECHO_PORT });
    const done = (ok: boolean): void => {
      clearTimeout(timer);
      sock.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    sock.on('connect', () => sock.write('control\n'));
    sock.on('data', (b: Buffer) => {
      got += b.toString('latin1');
      if (got.length >= ECHO_GREETING.length) done(got.startsWith(ECHO_GREETING));
    });
    sock.on('error', () => done(false));
    sock.on('close', () => done(got.startsWith(ECHO_GREETING)));
  });
}

/** An HTTP answer (any status) from the gateway at host:port. */
export async function gatewayAnswers(host: string, port: number, timeoutMs: number): Promise<boolean> {
  const h = host.includes(':') ? `[${host}]` : host;
  try {
    const res = await fetch(`http://${h}:${port}/healthz`, { signal: AbortSignal.timeout(timeoutMs) });
    await res.body?.cancel();
    return true;
  } catch {
    return false;
  }
}

/** Retries `attempt` (a listener may take a moment to start) until it succeeds or time is up. */
export async function retryFor(attempt: () => Promise<boolean>, totalMs: number, pauseMs = 250): Promise<boolean> {
  const deadline = Date.now() + totalMs;
  for (;;) {
    if (await attempt()) return true;
    if (Date.now() + pauseMs > deadline) return false;
    await new Promise((r) => setTimeout(r, pauseMs));
  }
}
