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
//   From the first call on: /workspace on disk past its limit (bounds.js, WorkspaceGuard) ends the
//   session. The main thread is asked to exit with WORKSPACE_OVER_EXIT_CODE, which the gateway
//   reads from the pod; if code holds that thread, a running call gets a `lost` result saying so
//   and the kernel a SIGKILL.
const fs = require('node:fs');
const { parentPort, workerData } = require('node:worker_threads');
const { encode } = require('./framing.js');
const { killStartedSince } = require('./procs.js');
const { startWorkspaceGuard, workspaceLimit } = require('./bounds.js');

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

// The last call started (its seq tells whether it is still running), for the guard's `lost` result.
let lastCall;
// How long the main thread has to exit once asked before the kernel is killed.
const EXIT_WAIT_MS = 1000;

function workspaceOver(files) {
  parentPort.postMessage({ op: 'workspaceOver', files });
  setTimeout(() => {
    const call = lastCall;
    if (call && Atomics.load(active, 0) === call.seq && call.fd !== undefined) {
      writeLost(call, {
        error: { ename: 'DiskFull', evalue: `/workspace went over its limit (${files ? 'files' : 'bytes'})`, traceback: '' },
        diskFull: 'workspace',
        durationMs: 0,
      });
    }
    process.kill(workerData.pid, 'SIGKILL');
  }, EXIT_WAIT_MS).unref();
}

parentPort.on('message', (call) => {
  timers.forEach(clearTimeout);
  timers = [];
  if (call.op !== 'start') return;
  if (lastCall === undefined) startWorkspaceGuard(workspaceLimit(), workspaceOver);
  lastCall = call;
  longestMs = Math.max(longestMs, call.timeoutMs);
  const running = () => Atomics.load(active, 0) === call.seq;
  timers.push(setTimeout(() => running() && killStartedSince(call.pid, call.sinceTicks), call.timeoutMs));
  timers.push(
    setTimeout(() => {
      if (!running()) return;
      killStartedSince(call.pid, call.sinceTicks);
      if (call.fd !== undefined) {
        writeLost(call, {
          error: { ename: 'KernelLost', evalue: `the call could not be interrupted within ${call.graceMs / 1000} s of its timeout`, traceback: '' },
          durationMs: call.timeoutMs + call.graceMs,
        });
      }
      process.kill(call.pid, 'SIGKILL');
    }, call.timeoutMs + call.graceMs),
  );
});

/** Writes a `lost` result for `call` straight to its client's socket (`fields`: error, durationMs, ...). */
function writeLost(call, fields) {
  const frame = encode({ id: call.id, type: 'result', status: 'lost', stdout: '', stderr: '', stdoutBytes: 0, stderrBytes: 0, truncated: false, ...fields });
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
