'use strict';
// The Node kernel's watchdog, run as a worker thread so it keeps running while the main thread
// is stuck (a synchronous loop after an `await` cannot be stopped by vm's timeout).
//   At the deadline: SIGKILL the processes the call started (so a blocking execSync returns).
//   At deadline + grace, if the call is still running: write a `lost` result straight to the
//   client's socket fd and SIGKILL the kernel. The main thread marks the end of a call in shared
//   memory, which is checked right before acting, so a finished call is never reported lost.
//   Between calls: code a call left running (a timer, a callback) that holds the main thread for
//   longer than the longest call so far may run (its timeout + grace) is stopped the only way
//   there is, with the kernel: SIGKILL. The session is then lost (its pod stops), where before its
//   calls waited out their time, unanswered, while the code took the pod's CPU for the session's life.
const fs = require('node:fs');
const { parentPort, workerData } = require('node:worker_threads');
const { encode } = require('./framing.js');
const { killStartedSince } = require('./procs.js');

// [sequence number of the running call (0: none), the main thread's last heartbeat (1/10 s since startedAt)]
const active = new Int32Array(workerData.shared);
let timers = [];
// The longest call timeout so far: no code may hold the thread longer between calls than a call may.
let longestMs = 0;
const HELD_CHECK_MS = 1000;

setInterval(() => {
  if (longestMs === 0 || Atomics.load(active, 0) !== 0) return;
  const heldMs = Date.now() - workerData.startedAt - Atomics.load(active, 1) * 100;
  // A heartbeat is due every second: held past two seconds more than the bound.
  if (heldMs > longestMs + workerData.graceMs + 2000 && Atomics.load(active, 0) === 0) process.kill(process.pid, 'SIGKILL');
}, HELD_CHECK_MS);

parentPort.on('message', (call) => {
  timers.forEach(clearTimeout);
  timers = [];
  if (call.op !== 'start') return;
  longestMs = Math.max(longestMs, call.timeoutMs);
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
