'use strict';
// codemode session kernel for Node (runtime/README.md, runtime/PROTOCOL.md):
//   node kernel.js --socket /tmp/.codemode/kernel.sock
// Listens on a UNIX socket (mode 0600), serves framed requests from any number of clients (one
// relay per gateway process), runs one call at a time; a request that arrives meanwhile gets an
// immediate KernelBusy error marked "busy" (it did not start). Node 18+, built-ins only.
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { Worker } = require('node:worker_threads');
const { encode, FrameDecoder } = require('./framing.js');
const { CallOutput, capChars } = require('./output.js');
const { nowTicks, killStartedSince } = require('./procs.js');
const { NodeSession, ExitRequest, safeText, thrownText, isExitRequest } = require('./session.js');
const { ToolCalls, prepareEnvironment } = require('./tools.js');
const display = require('./display.js');
const { Outcomes, checkKey } = require('./outcomes.js');
const { Watch, WORKSPACE_OVER_EXIT_CODE } = require('./bounds.js');

const DEFAULT_TIMEOUT_MS = 30000;
const DEFAULT_CAP_CHARS = 50000;
const GRACE_MS = 2000;
// How long a network check waits for the pod to lose its network (runtime/python: NETWORK_CHECK_SECONDS).
const NETWORK_CHECK_MS = 10_000;
// How often: every 10 ms for the first 2 s, then every 50 ms (runtime/python/codemode_kernel/server.py).
const NETWORK_CHECK_INTERVAL_MS = { first: 10, then: 50, switchMs: 2000 };
const EMPTY_OUTPUT = { stdout: '', stderr: '', stdoutBytes: 0, stderrBytes: 0, truncated: false };
// An exception's type name is kept to this many characters (the gateway keeps as many).
const MAX_ENAME_CHARS = 200;

/**
 * The result with its exception texts cut to the call's cap, like its output: an error can carry
 * a message of any size, and the result frame must stay bounded.
 */
function capError(result, cap) {
  if (!result.error) return result;
  const { ename, evalue, traceback } = result.error;
  const error = {
    ename: capChars(safeText(ename ?? ''), MAX_ENAME_CHARS),
    evalue: capChars(safeText(evalue ?? ''), cap),
    traceback: capChars(safeText(traceback ?? ''), cap),
  };
  // A cut text is reported like cut output: the traceback becomes the call's stderr.
  const cut = error.ename !== safeText(ename ?? '') || error.evalue !== safeText(evalue ?? '') || error.traceback !== safeText(traceback ?? '');
  return { ...result, error, ...(cut && { truncated: true }) };
}

function log(msg, fields = {}) {
  // Diagnostics go to fd 2 directly (process.stderr is captured): in a sandbox pod a file in /tmp,
  // which its size limit and the file limit bound (a write may fail: a log line is not worth a
  // call). Never code or output.
  try {
    fs.writeSync(2, `${JSON.stringify({ msg, ...fields })}\n`);
  } catch {
    // /tmp full or the file at its limit
  }
}

const socketArg = process.argv.indexOf('--socket');
const socketPath = socketArg >= 0 ? process.argv[socketArg + 1] : undefined;
if (!socketPath) {
  process.stderr.write('usage: kernel.js --socket PATH\n');
  process.exit(2);
}
// The `codemode` module (tool calls, runtime/sdk) for cells and the programs they start.
prepareEnvironment(socketPath);
// The kernel's own display directory, taken now: session code may change process.env (for the
// programs it starts), and the kernel empties this directory at each call.
const DISPLAY_DIR = process.env.CODEMODE_DISPLAY_DIR;
// --held-grace-ms N: how long a call's tool requests wait for a recall after its stream went (tools.js).
const graceArg = process.argv.indexOf('--held-grace-ms');
const heldGraceMs = graceArg >= 0 ? Number(process.argv[graceArg + 1]) : undefined;
const tools = new ToolCalls(Number.isFinite(heldGraceMs) && heldGraceMs >= 0 ? heldGraceMs : undefined);

// --- Output and process plumbing: everything user code writes goes to the running call. ---
let current = null; // CallOutput of the running call; output between calls is dropped
let callStdin = { text: '', stream: null };

/**
 * A chunk written to process.stdout/stderr as a string or a Buffer, or throws like Node's
 * stream.write does for anything else (a number, an object, null): in the caller's code, never in
 * the kernel's byte counts. Any ArrayBufferView (a DataView too, from any realm) is its bytes.
 */
function writtenChunk(chunk, encoding) {
  if (typeof chunk === 'string') return encoding && encoding !== 'utf8' && encoding !== 'utf-8' ? Buffer.from(chunk, encoding) : chunk;
  if (ArrayBuffer.isView(chunk)) return Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  const received =
    chunk === null
      ? 'null'
      : typeof chunk === 'object' || typeof chunk === 'function'
        ? `type ${typeof chunk}`
        : `type ${typeof chunk} (${safeText(chunk).slice(0, 40)})`;
  const err = new TypeError(`The "chunk" argument must be of type string or an instance of Buffer, TypedArray, or DataView. Received ${received}`);
  err.code = 'ERR_INVALID_ARG_TYPE';
  throw err;
}

for (const name of ['stdout', 'stderr']) {
  process[name].write = function write(chunk, encoding, cb) {
    if (typeof encoding === 'function') [cb, encoding] = [encoding, undefined];
    const data = writtenChunk(chunk, encoding);
    if (current) current.write(name, data);
    if (cb) process.nextTick(cb);
    return true;
  };
}
// process.stdin is the call's `stdin` (a stream that ends after it); fd 0 itself is not redirected.
Object.defineProperty(process, 'stdin', {
  configurable: true,
  get: () => callStdin.stream || (callStdin.stream = NodeSession.stdinStream(callStdin.text)),
});
/** The real exit, for the kernel itself: user code's process.exit only ends its call. */
const exitKernel = process.exit.bind(process);
process.exit = (code) => {
  const exit = new ExitRequest(code);
  session.exitRequested(exit); // ends the call even from a callback (session.js)
  throw exit;
};
// Warnings (deprecations, ...) go to the running call's stderr, except the kernel's own use of
// the experimental vm import loader.
process.removeAllListeners('warning');
process.on('warning', (w) => {
  if (current && !(w.name === 'ExperimentalWarning' && /\bvm\b/.test(w.message))) current.write('stderr', `${w.name}: ${w.message}\n`);
});
// Errors from timers or promises that outlive their call must not end the kernel.
const uncaught = (err) => {
  try {
    // process.exit() in a callback: it ended the call (session.js); nothing went wrong.
    if (isExitRequest(err)) return;
    if (current) current.write('stderr', `Uncaught ${thrownText(err)}\n`);
  } catch (e) {
    log('Failed to report an uncaught error', { error: safeText(e) });
  }
};
/**
 * The kernel's listeners for uncaught errors, put back when the code removed them
 * (`process.removeAllListeners()`): without one, the next error a timer of the code throws would
 * end the kernel and the session with it. Checked before each call.
 */
function keepUncaughtListeners() {
  for (const event of ['uncaughtException', 'unhandledRejection']) if (!process.listeners(event).includes(uncaught)) process.on(event, uncaught);
}
keepUncaughtListeners();

// The streams each context's console writes to (a reset makes a new console: session.js).
const io = { stdout: process.stdout, stderr: process.stderr };
const session = new NodeSession(io);
// [sequence number of the running call (0: none), the main thread's last heartbeat (1/10 s since start)]
const shared = new SharedArrayBuffer(8);
const active = new Int32Array(shared);
const startedAt = Date.now();
const beat = () => Atomics.store(active, 1, Math.floor((Date.now() - startedAt) / 100));
beat();
// The watchdog reads it to tell code left running between calls that holds the thread (watchdog.js).
setInterval(beat, 1000).unref();
const watchdog = new Worker(path.join(__dirname, 'watchdog.js'), { workerData: { shared, startedAt, graceMs: GRACE_MS, pid: process.pid } });
watchdog.unref();
// The session's /workspace went past its limit (watchdog.js): the kernel ends with the status the
// gateway reads from the pod, and the container with every process in it.
watchdog.on('message', (m) => {
  if (m && m.op === 'workspaceOver') {
    log('Ending the session: /workspace is over its limit', { files: m.files === true });
    exitKernel(WORKSPACE_OVER_EXIT_CODE);
  }
});
let busy = false;
let seq = 0;
const outcomes = new Outcomes(errorResult);

async function execute(conn, req) {
  // After the gateway saw the NetworkPolicy restored: no code starts before this pod has no
  // network again (the CNI re-programs it a moment later).
  if (req.netcheck === true && !(await networkIsolated())) return notIsolatedResult();
  const started = Date.now();
  const call = new CallOutput(req.id, req.capChars, conn.send);
  const sinceTicks = nowTicks();
  const watch = new Watch();
  keepUncaughtListeners();
  current = call;
  callStdin = { text: req.stdin || '', stream: null };
  Atomics.store(active, 0, ++seq);
  const handle = conn.sock._handle;
  watchdog.postMessage({
    op: 'start',
    seq,
    id: req.id,
    pid: process.pid,
    timeoutMs: req.timeoutMs,
    graceMs: GRACE_MS,
    sinceTicks,
    fd: handle && handle.fd >= 0 ? handle.fd : undefined,
  });
  let outcome;
  display.clear(DISPLAY_DIR);
  try {
    outcome = await session.run(req.code, `cell-${seq}`, req.timeoutMs, req.capChars);
  } catch (err) {
    log('Failed to run a call', { error: safeText(err) });
    outcome = { status: 'error', error: { ename: 'KernelError', evalue: safeText(err), traceback: '' } };
  } finally {
    // A fresh heartbeat before the call is marked over: the watchdog never counts the call's own
    // time (bounded by its timeout) as code holding the thread between calls.
    beat();
    Atomics.store(active, 0, 0);
    watchdog.postMessage({ op: 'end' });
    current = null;
  }
  // The bounds the call met (bounds.js). Processes a call leaves running normally outlive it, but
  // a fork bomb's must not hold the session's process cap (and its CPU) for the rest of its life.
  const bounds = watch.report();
  if (outcome.status === 'timeout' || bounds.processLimit) killStartedSince(process.pid, sinceTicks);
  call.finish();
  const { resultTruncated, ...rest } = outcome;
  const fields = call.resultFields();
  return { ...rest, ...fields, ...bounds, truncated: fields.truncated || Boolean(resultTruncated), durationMs: Date.now() - started };
}

function errorResult(ename, evalue) {
  return { status: 'error', ...EMPTY_OUTPUT, durationMs: 0, error: { ename, evalue, traceback: '' } };
}

/**
 * The answer to a call that arrived while another ran. `busy` tells it apart from an exception the
 * code threw (one named KernelBusy too): this call did not start.
 */
function busyResult() {
  return { ...errorResult('KernelBusy', 'another call is running in this session; retry when it has finished'), busy: true };
}

/** The answer to a call with `netcheck` in a pod that could still reach the network: the code did not start. */
function notIsolatedResult() {
  return {
    ...errorResult(
      'NetworkNotIsolated',
      `the sandbox pod could still reach the network ${NETWORK_CHECK_MS / 1000} s after the call arrived (its NetworkPolicy is not enforced), so the code was not run`,
    ),
    notIsolated: true,
  };
}

/** The validated exec request with defaults, or throws saying what is wrong. */
function checkExec(msg) {
  const timeoutMs = msg.timeoutMs === undefined ? DEFAULT_TIMEOUT_MS : msg.timeoutMs;
  const capChars = msg.capChars === undefined ? DEFAULT_CAP_CHARS : msg.capChars;
  if (typeof msg.code !== 'string') throw new Error('"code" must be a string');
  if (typeof timeoutMs !== 'number' || !(timeoutMs > 0)) throw new Error('"timeoutMs" must be a positive number');
  if (!Number.isInteger(capChars) || capChars < 0) throw new Error('"capChars" must be a non-negative integer');
  if (msg.stdin !== undefined && msg.stdin !== null && typeof msg.stdin !== 'string') throw new Error('"stdin" must be a string');
  if (msg.netcheck !== undefined && msg.netcheck !== null && typeof msg.netcheck !== 'boolean') throw new Error('"netcheck" must be a boolean');
  // vm's timeout must be an integer number of milliseconds.
  return { ...msg, timeoutMs: Math.max(1, Math.round(timeoutMs)), capChars };
}

function dispatch(conn, msg) {
  if (msg === null || typeof msg !== 'object' || typeof msg.id !== 'string') {
    conn.send({ type: 'error', message: 'a request must be a JSON object with a string "id"' });
    return;
  }
  const cap = Number.isInteger(msg.capChars) && msg.capChars >= 0 ? msg.capChars : DEFAULT_CAP_CHARS;
  const reply = (result) => conn.send({ ...capError(result, cap), id: msg.id, type: 'result' });
  if (msg.op === 'ping') return conn.send({ id: msg.id, type: 'pong', language: 'node', busy, pid: process.pid });
  if (msg.op === 'callResult') return tools.deliver(msg); // the answer to a nested tool call (tools.js)
  // The outcome of a call whose client's stream broke (PROTOCOL.md, "Recall"): sent as it was.
  if (msg.op === 'recall') {
    const waits = outcomes.recall(msg.key, (result) => conn.send({ ...result, id: msg.id, type: 'result' }));
    // Asked with "tools": the running call's tool requests now go to this stream (tools.js).
    if (waits && msg.tools === true) tools.attach(conn, msg.id, msg.key);
    else if (waits) tools.withoutGateway(msg.key);
    return undefined;
  }
  if (msg.op !== 'exec' && msg.op !== 'reset')
    return reply(errorResult('ProtocolError', `unknown op ${String(JSON.stringify(msg.op)).slice(0, 100)}; use "exec", "ping", "reset" or "recall"`));
  let req = msg;
  try {
    if (msg.op === 'exec') {
      req = checkExec(msg);
      checkKey(msg.key);
    }
  } catch (err) {
    return reply(errorResult('ProtocolError', err.message));
  }
  if (busy) {
    tools.superseded(); // a call whose replica stopped must not keep the session busy (tools.js)
    return reply(busyResult());
  }
  busy = true;
  if (req.op === 'exec') {
    outcomes.started(req.key);
    // Now, not when the code starts: a recall that comes before then finds its tool calls' route.
    tools.begin(conn, msg.id, req.key);
  }
  const run = req.op === 'exec' ? execute(conn, req) : resetSession();
  run
    .catch((err) => {
      log('Failed to run a call', { error: safeText(err) });
      return errorResult('KernelError', safeText(err));
    })
    .then((result) => {
      // Whatever fails here, the call gets exactly one result and its recalls are answered.
      let final = errorResult('KernelError', 'the call ended without a result');
      try {
        // What still waits on a tool gets an error: the code's call is over.
        if (req.op === 'exec') tools.end();
        const items = req.op === 'exec' ? displayed(req) : [];
        for (const item of items) conn.send({ ...item, id: msg.id, type: 'display' });
        final = capError(result, cap);
      } catch (err) {
        log('Failed to finish a call', { error: safeText(err) });
        final = errorResult('KernelError', `the call's result could not be made: ${safeText(err)}`.slice(0, 1000));
      } finally {
        busy = false; // free before replying, so the client's next request never sees it busy
        try {
          conn.send({ ...final, id: msg.id, type: 'result' });
        } finally {
          if (req.op === 'exec') outcomes.finished(req.key, final);
        }
      }
    });
}

/** The call's images, HTML and tables (display.js), saved in the workspace's figures too. */
function displayed(req) {
  try {
    return display.collect(DISPLAY_DIR, display.limitsOf(req), req.capChars);
  } catch (err) {
    log('Failed to collect display items', { error: String(err) });
    return [];
  }
}

async function resetSession() {
  session.reset();
  return { status: 'ok', ...EMPTY_OUTPUT, durationMs: 0 };
}

function serve(sock) {
  const decoder = new FrameDecoder();
  const conn = {
    sock,
    send(message) {
      if (!sock.destroyed) sock.write(encode(message));
    },
    /** False once the client went away (its stream ended). */
    alive: () => !sock.destroyed && !sock.readableEnded,
  };
  sock.on('data', (chunk) => {
    let messages;
    try {
      messages = decoder.push(chunk);
    } catch (err) {
      conn.send({ type: 'error', message: err.message });
      sock.destroy();
      return;
    }
    for (const m of messages) dispatch(conn, m);
  });
  sock.on('error', () => undefined); // a client that went away; its running call still finishes
  sock.on('close', () => tools.lost(conn));
}

function listen(socketPath) {
  fs.mkdirSync(path.dirname(socketPath), { recursive: true, mode: 0o700 });
  fs.mkdirSync(DISPLAY_DIR, { recursive: true, mode: 0o700 });
  try {
    fs.unlinkSync(socketPath);
  } catch {
    // no stale socket
  }
  tools.listen(process.env.CODEMODE_TOOLS_SOCKET);
  const server = net.createServer(serve);
  const umask = process.umask(0o177); // the socket file is created 0600
  server.listen(socketPath, () => {
    fs.chmodSync(socketPath, 0o600);
    log('Started kernel', { language: 'node', socket: socketPath, pid: process.pid });
  });
  process.umask(umask);
}

/**
 * Resolves true once the pod cannot connect to the API server's Service (refused, or no answer
 * within 0.3 s), checked every 10 ms (after 2 s every 50 ms) for at most 10 s; only with
 * CODEMODE_NETWORK_CHECK=1 (sandbox pods). Some CNIs program a new pod's NetworkPolicy a moment
 * after it started: no code may run in that moment, so the socket is created only after this.
 */
async function networkIsolated(limitMs = NETWORK_CHECK_MS) {
  const host = process.env.KUBERNETES_SERVICE_HOST ?? '';
  if (process.env.CODEMODE_NETWORK_CHECK !== '1' || host === '') return true;
  const port = Number(process.env.KUBERNETES_SERVICE_PORT) || 443;
  const reachable = () =>
    new Promise((resolve) => {
      const s = net.connect({ host, port });
      const done = (v) => {
        s.destroy();
        resolve(v);
      };
      s.setTimeout(300, () => done(false));
      s.once('connect', () => done(true));
      s.once('error', () => done(false));
    });
  const start = Date.now();
  const deadline = start + limitMs;
  const { first, then, switchMs } = NETWORK_CHECK_INTERVAL_MS;
  for (;;) {
    if (!(await reachable())) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, Date.now() - start < switchMs ? first : then));
  }
}

// libuv starts its thread pool (asynchronous fs, dns, crypto and zlib calls) at its first use, and
// aborts the process when it cannot create a thread then: code that held the pod's process cap
// (a fork bomb) at the session's first asynchronous file read took the kernel down with it
// (SIGABRT, measured: 1 in 8 node fork bombs). Started here, before any code runs.
const threadPool = fs.promises.access('/');
Promise.all([networkIsolated(), threadPool]).then(([isolated]) => {
  if (isolated) return listen(socketPath);
  log('Refused to start: the pod could still reach the network (its NetworkPolicy is not enforced)', {});
  exitKernel(3);
});
