'use strict';
// The Node kernel's watchdog, run as a worker thread so it keeps running while the main thread
// is stuck (a synchronous loop after an `await` cannot be stopped by vm's timeout).
//   At the deadline: SIGKILL the processes the call started (so a blocking execSync returns).
//   At deadline + grace, if the call is still running: write a `lost` result straight to the
//   client's socket fd and SIGKILL the kernel. The main thread marks the end of a call in shared
//   memory, which is checked right before acting, so a finished call is never reported lost.
const fs = require('node:fs');
const { parentPort, workerData } = require('node:worker_threads');
const { encode } = require('./framing.js');
const { killStartedSince } = require('./procs.js');

const active = new Int32Array(workerData.shared); // [sequence number of the running call, 0 if none]
let timers = [];

parentPort.on('message', (call) => {
  timers.forEach(clearTimeout);
  timers = [];
  if (call.op !== 'start') return;
  const running = () => Atomics.load(active, 0) === call.seq;
  timers.push(setTimeout(() => running() && killStartedSince(call.pid, call.sinceTicks), call.timeoutMs));
  timers.push(
    setTimeout(() => {
      if (!running()) return;
      killStartedSince(call.pid, call.sinceTicks);
      if (call.fd !== undefined) writeLost(call);
      process.kill(call.pid, 'SIGKILL');
    }, call.timeoutMs + call.graceMs),
  );
});

function writeLost(call) {
  const frame = encode({
    id: call.id,
    type: 'result',
    status: 'lost',
    stdout: '',
    stderr: '',
    stdoutBytes: 0,
    stderrBytes: 0,
    truncated: false,
    durationMs: call.timeoutMs + call.graceMs,
    error: { ename: 'KernelLost', evalue: `the call could not be interrupted within ${call.graceMs / 1000} s of its timeout`, traceback: '' },
  });
  // The socket is non-blocking: retry briefly on EAGAIN, give up otherwise (the socket then
  // just closes, which the gateway also reads as a lost session).
  for (let off = 0, tries = 0; off < frame.length && tries < 1000; tries++) {
    try {
      off += fs.writeSync(call.fd, frame, off);
    } catch (err) {
      if (err.code !== 'EAGAIN') return;
    }
  }
}
