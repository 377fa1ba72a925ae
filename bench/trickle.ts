// What a stream trickled a byte per write costs the gateway: session code finds its kernel's
// stream to the gateway (as the hostile-frames e2e attacks do) and writes one frame of its own
// call into it, one byte per write, for a while; the gateway runs in a process of its own (as
// deployed) and its resident memory is read every second. Each write reaches the gateway as an
// exec-stream message of its own, unless a stage on the way (shim, containerd, kubelet, API
// server) was slower and merged some: what the gateway holds per message is what this shows.
// Usage: tsx bench/trickle.ts [seconds=20] [delay between writes in µs=0]
import { readFileSync } from 'node:fs';
import './env.js';
import { freePort, gatewayEnv, startGateway, stopGateway } from '../test/e2e/faults/helpers/gateway-process.js';
import { createNamespace, deleteNamespace, testKube } from '../test/e2e/helpers/kube.js';
import { connect } from '../test/e2e/helpers/operator.js';
import { gatewayPid } from './gateway-pid.js';

const seconds = Number(process.argv[2] ?? 20);
const delayUs = Number(process.argv[3] ?? 0);

/** Python: writes one output frame of the running call, a byte per write, for `seconds`. */
const TRICKLE = `
import gc, json, os, time
fds = [c.pipes[1] if c.pipes else c.sock.fileno() for c in gc.get_objects() if type(c).__name__ == 'Connection']
call = max((o.call_id for o in gc.get_objects() if type(o).__name__ == 'CallOutput'), key=int)
body = json.dumps({'id': call, 'type': 'output', 'stream': 'stdout', 'text': 'x' * 2_500_000}).encode()
data = b'%d\\n' % len(body) + body
end = time.monotonic() + ${seconds}
sent = 0
while sent < len(data) and time.monotonic() < end:
    for fd in fds:
        os.write(fd, data[sent:sent + 1])
    sent += 1
    ${delayUs > 0 ? `time.sleep(${delayUs / 1e6})` : 'pass'}
os.write(2, b'trickled %d bytes\\n' % sent)
time.sleep(3600)
`;

/** CPU time (ms, user + system) the process used so far. */
function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) * 10;
}

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1] ?? 0) / 1024;
}

const k = testKube();
const ns = await createNamespace(k, 'bench-trickle');
const port = await freePort();
const gateway = await startGateway(
  gatewayEnv(ns, { CODEMODE_WARM_POOL_MIN: '0', CODEMODE_WARM_POOL_MAX: '0', CODEMODE_MAX_TIMEOUT_SECONDS: String(seconds + 30) }),
  port,
);
try {
  const pid = gatewayPid(port);
  if (pid === undefined) throw new Error('gateway process not found');
  const client = await connect(gateway.url, 'current');
  const session = (await client.callTool('create_session', { language: 'python' })).structuredContent?.session;
  for (let i = 0; i < 20; i++) await client.callTool('execute_code', { session, code: 'print(1)' });
  const before = rssMb(pid);
  let peak = before;
  const sampler = setInterval(() => (peak = Math.max(peak, rssMb(pid))), 1000);
  const t0 = performance.now();
  const cpu0 = cpuMs(pid);
  const r = await client.callTool('execute_code', { session, code: TRICKLE, timeout_seconds: seconds + 10 }, undefined, { timeout: (seconds + 60) * 1000 });
  clearInterval(sampler);
  peak = Math.max(peak, rssMb(pid));
  const stderr = String(r.structuredContent?.stderr ?? '');
  const ended = r.structuredContent
    ? `${String(r.structuredContent.phase)} ${String(r.structuredContent.reason ?? '')}`
    : r.content
        .map((c) => c.text ?? '')
        .join(' ')
        .replace(/\s+/g, ' ')
        .slice(0, 300);
  console.log(`call ended after ${((performance.now() - t0) / 1000).toFixed(1)} s: ${ended}; ${/trickled \d+ bytes/.exec(stderr)?.[0] ?? ''}`);
  console.log(`gateway CPU during the call: ${cpuMs(pid) - cpu0} ms`);
  console.log(`gateway RSS: ${before.toFixed(1)} MB before, peak ${peak.toFixed(1)} MB (+${(peak - before).toFixed(1)} MB)`);
  await client.close();
} finally {
  await stopGateway(gateway);
  await deleteNamespace(k, ns);
}
