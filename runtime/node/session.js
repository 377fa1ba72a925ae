'use strict';
// The Node session: one persistent vm context; each call is a script run in it.
//
// Persistence (see runtime/README.md):
// - Code without top-level `await` runs as a script. `var`, functions and classes persist;
//   top-level `let`/`const` are rewritten to `var` (same columns) so they persist AND can be
//   declared again by a later call (V8 keeps script-level let/const too, but a second
//   `const x` would be a SyntaxError). The result is the script's completion value, i.e. the
//   value of the last expression statement, as in the Node REPL.
// - Code with top-level `await` runs inside an async function: its declarations are local to
//   the call. Assign without a keyword (`data = await load()`) or to `globalThis` to keep values.
//   The result is the last statement's value when it is an expression.
const path = require('node:path');
const util = require('node:util');
const vm = require('node:vm');
const { Readable } = require('node:stream');
const { createRequire } = require('node:module');
const { scan } = require('./scan.js');
const { capChars } = require('./output.js');

/**
 * Thrown by the context's process.exit(): ends the call, not the kernel. Its code is the one
 * given, else process.exitCode, else 0 (as Node exits).
 */
class ExitRequest extends Error {
  constructor(code) {
    const given = code !== undefined && code !== null;
    const exitCode = given ? code : (process.exitCode ?? 0);
    super(`process.exit(${given ? code : ''}) was called${given || exitCode === 0 ? '' : ` with process.exitCode ${exitCode}`}`);
    this.name = 'ProcessExit';
    this.exitCode = Number(exitCode);
  }
}

/** The outcome of a call that called process.exit: `ok` for code 0, else an error ProcessExit. */
function exitOutcome(exit) {
  return exit.exitCode === 0 ? { status: 'ok' } : { status: 'error', error: { ename: exit.name, evalue: exit.message, traceback: '' } };
}

/** instanceof ExitRequest, false for a thrown Proxy whose getPrototypeOf trap throws. */
function isExitRequest(err) {
  try {
    return err instanceof ExitRequest;
  } catch {
    return false;
  }
}

let requireAt = { cwd: '', require: null };

/** Node's require resolving from the current working directory (process.chdir moves it). */
function requireHere() {
  const cwd = process.cwd();
  if (requireAt.cwd !== cwd) requireAt = { cwd, require: createRequire(path.join(cwd, '[codemode]')) };
  return requireAt.require;
}

/**
 * A context's `require`: relative names resolve from the working directory at the time of the
 * call (process.chdir moves it), not the kernel's start; `resolve`, `resolve.paths`, `cache`,
 * `extensions` and `main` as Node's (`cache` and `extensions` are Node's one module cache and table).
 */
function contextRequire() {
  const here = requireHere();
  const require = (id) => requireHere()(id);
  require.resolve = (request, options) => requireHere().resolve(request, options);
  require.resolve.paths = (request) => requireHere().resolve.paths(request);
  Object.assign(require, { cache: here.cache, extensions: here.extensions, main: here.main });
  return require;
}

function makeContext(io) {
  const sandbox = {};
  const context = vm.createContext(sandbox, { name: 'codemode' });
  // A fresh context has the JavaScript built-ins only: add Node's globals (process, Buffer,
  // timers, URL, fetch, ...). They come from the kernel's realm: `instanceof` across realms is
  // false (e.g. `Buffer.from('x') instanceof Uint8Array`), Array.isArray and util.inspect work.
  const own = new Set(vm.runInContext('Object.getOwnPropertyNames(globalThis)', context));
  for (const key of Object.getOwnPropertyNames(globalThis)) {
    if (own.has(key) || key === 'global' || key === 'globalThis') continue;
    Object.defineProperty(sandbox, key, Object.getOwnPropertyDescriptor(globalThis, key));
  }
  Object.assign(sandbox, {
    global: vm.runInContext('globalThis', context),
    // Its own console: a reset drops whatever the code patched on the old one.
    console: new console.Console({ stdout: io.stdout, stderr: io.stderr }),
    require: contextRequire(),
    module: { exports: {} },
    __filename: path.join(process.cwd(), '[codemode]'),
    __dirname: process.cwd(),
    // The codemode module's display(), as a global like in a notebook (loaded on first use).
    display: (...args) => require(path.join(__dirname, '..', 'sdk', 'node', 'display.js')).display(...args),
  });
  sandbox.exports = sandbox.module.exports;
  return context;
}

// import() in cells, resolved from the working directory (Node 20.12+/21.7+; on older versions
// import() in a cell fails with ERR_VM_DYNAMIC_IMPORT_CALLBACK_MISSING: use require()).
const IMPORT_OPTION =
  vm.constants && vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER ? { importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER } : {};

class NodeSession {
  constructor(io) {
    this.language = 'node';
    this.io = io;
    this.reset();
  }

  reset() {
    this.context = makeContext(this.io);
  }

  /**
   * process.exit() was called (kernel.js): the running call ends with it, whether the code that
   * called it was the cell's own or a callback of it (a timer, an event, a promise), and even
   * when that code caught the ExitRequest. Between calls it does nothing.
   */
  exitRequested(exit) {
    if (!this.running || this.exit) return;
    this.exit = exit;
    this.onExit(exit);
  }

  /** Runs one cell; returns { status, result?, error? }. Sync timeouts come from vm's `timeout`. */
  async run(code, filename, timeoutMs, cap) {
    const compiled = this.compile(code, filename);
    if (compiled.error) return { status: 'error', error: describeError(compiled.error, code, filename) };
    const deadline = Date.now() + timeoutMs;
    this.exit = null;
    const exited = new Promise((_, reject) => {
      this.onExit = reject;
    });
    exited.catch(() => undefined); // awaited only by async cells
    this.running = true;
    try {
      let value = compiled.script.runInContext(this.context, { timeout: timeoutMs, displayErrors: false });
      if (compiled.isAsync) value = await withDeadline(Promise.race([value, exited]), deadline - Date.now());
      if (this.exit) return exitOutcome(this.exit);
      if (value === undefined) return { status: 'ok' };
      // The value's own code (a custom inspect, a Proxy's traps) runs here: as the code's.
      const text = this.asCode(() => util.inspect(value), deadline);
      const result = capChars(text, cap);
      return { status: 'ok', result, resultTruncated: result.length < text.length };
    } catch (err) {
      if (isScriptTimeout(err) || err === TIMED_OUT) return { status: 'timeout', error: timeoutError(timeoutMs) };
      if (this.exit) return exitOutcome(this.exit);
      // Reading what was thrown runs its getters, traps and toString: as the code's too.
      try {
        return this.asCode(() => (isExitRequest(err) ? exitOutcome(err) : { status: 'error', error: describeError(err, code, filename) }), deadline);
      } catch (again) {
        if (isScriptTimeout(again)) return { status: 'timeout', error: timeoutError(timeoutMs) };
        return { status: 'error', error: { ename: 'Error', evalue: 'the thrown value could not be read', traceback: '' } };
      }
    } finally {
      this.running = false;
      // The exit code a call set is its own, not the next call's.
      process.exitCode = undefined;
    }
  }

  /**
   * fn() under vm's timeout for what is left of the call until `deadline` (at least 1 ms): code of
   * the session's (a custom inspect, a getter or Proxy trap of a thrown value, a toString) that
   * loops is interrupted at the call's timeout, as the code itself is, instead of running on until
   * the watchdog gives the kernel up. Throws what fn throws, ERR_SCRIPT_EXECUTION_TIMEOUT included.
   */
  asCode(fn, deadline) {
    AS_CODE.fn = fn;
    try {
      return AS_CODE_SCRIPT.runInContext(AS_CODE, { timeout: Math.max(1, deadline - Date.now()), displayErrors: false });
    } finally {
      AS_CODE.fn = null;
    }
  }

  compile(code, filename) {
    const options = { filename, ...IMPORT_OPTION };
    const info = scan(code);
    const attempts = [];
    if (info && info.decls.length > 0) attempts.push(rewriteDeclarations(code, info.decls));
    attempts.push(code);
    let error; // ends up as the error of the code as written (the last attempt): the one that makes sense
    for (const source of attempts) {
      try {
        return { script: new vm.Script(source, options), isAsync: false };
      } catch (err) {
        error = err;
      }
    }
    // (`for await` fails with "Unexpected reserved word", so look at the code, not the message.)
    if (!/\bawait\b/.test(code)) return { error };
    // Top-level await: run the cell as the body of an async function, one line down (lineOffset
    // keeps line numbers), with `return (...)` around the last statement when it is an expression.
    const wrapped = (body) => `(async () => {\n${body}\n})()`;
    for (const body of returnLastVariants(code, info)) {
      try {
        return { script: new vm.Script(wrapped(body), { ...options, lineOffset: -1 }), isAsync: true };
      } catch {
        // try the next split
      }
    }
    try {
      return { script: new vm.Script(wrapped(code), { ...options, lineOffset: -1 }), isAsync: true };
    } catch {
      return { error };
    }
  }

  /** A Readable with the call's stdin (for process.stdin), created when first read. */
  static stdinStream(text) {
    return Readable.from(text ? [Buffer.from(text, 'utf8')] : []);
  }
}

/**
 * Top-level `let`/`const` become `var` (same columns), and `class X {...}` becomes
 * `var X = class X {...};`, so that a class whose definition threw (e.g. `extends` a name not yet
 * defined) is not left in its temporal dead zone for good, and a later call may define it again.
 * (Columns after `class` on its first line move by the inserted `var X = `.)
 */
function rewriteDeclarations(code, decls) {
  // In one pass, pieces joined once: splicing into the whole text per declaration copied it each
  // time (a cell of 20,000 top-level lets took 10 s, outside vm's timeout).
  const pieces = [];
  let at = 0;
  for (const { pos, kw, name, end } of [...decls].sort((a, b) => a.pos - b.pos)) {
    if (pos < at) continue; // within one rewritten already (the scan's answers are hints)
    pieces.push(code.slice(at, pos));
    if (kw === 'class') {
      pieces.push(`var ${name} = `, code.slice(pos, end + 1), ';');
      at = end + 1;
    } else {
      pieces.push(kw === 'const' ? 'var  ' : 'var');
      at = pos + kw.length;
    }
  }
  pieces.push(code.slice(at));
  return pieces.join('');
}

const STATEMENT_KEYWORD = /^(var|let|const|function|async\s+function|class|if|for|while|do|switch|try|throw|return|break|continue|import|export)\b|^[{;]/;

/**
 * Candidate bodies with `return (<last statement>)`: the splits after the last statement that
 * starts with a keyword, earliest (longest tail) first, as JavaScript reads lines that continue an
 * expression (`s.a\n + s.b` is one expression; tried latest first, `+ s.b` alone compiled too and
 * was returned).
 */
function* returnLastVariants(code, info) {
  if (!info) return;
  let end = code.length;
  if (code[info.last] === ';') end = info.last;
  const tails = [];
  for (const start of info.starts
    .filter((s) => s < end)
    .slice(-20)
    .reverse()) {
    if (STATEMENT_KEYWORD.test(code.slice(start, end))) break;
    tails.push(start);
  }
  for (const start of tails.reverse()) yield `${code.slice(0, start)}return (${code.slice(start, end)}\n);${code.slice(end + 1)}`;
}

const TIMED_OUT = Symbol('timed out');
// asCode()'s own context, which no session code can reach (or freeze): vm's timeout covers all
// the code a script runs, whatever context that code belongs to.
const AS_CODE = vm.createContext({ fn: null });
const AS_CODE_SCRIPT = new vm.Script('fn()', { filename: 'codemode' });

/** vm's timeout error (a native error whose own `code` says so): read without running code of the session's. */
function isScriptTimeout(err) {
  if (!util.types.isNativeError(err)) return false;
  const code = Object.getOwnPropertyDescriptor(err, 'code');
  return code !== undefined && 'value' in code && code.value === 'ERR_SCRIPT_EXECUTION_TIMEOUT';
}

function withDeadline(promise, ms) {
  let timer;
  const deadline = new Promise((_, reject) => {
    timer = setTimeout(() => reject(TIMED_OUT), Math.max(0, ms));
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

function timeoutError(timeoutMs) {
  return { ename: 'Timeout', evalue: `the call ran past its timeout of ${timeoutMs} ms and was interrupted`, traceback: '' };
}

/** Text of any value, even one whose conversion throws (a thrown value, an odd `name`). */
function safeText(v) {
  try {
    return String(v);
  } catch {
    return inspectText(v);
  }
}

/** util.inspect of any value, or its String() when inspecting throws, or '<unprintable>'. */
function inspectText(v) {
  try {
    return util.inspect(v);
  } catch {
    try {
      return String(v);
    } catch {
      return '<unprintable>';
    }
  }
}

/** obj[key], or undefined when reading it throws (a getter, a Proxy trap). */
function read(obj, key) {
  try {
    return obj !== null && (typeof obj === 'object' || typeof obj === 'function') ? obj[key] : undefined;
  } catch {
    return undefined;
  }
}

/** ename and evalue of an error object: its name and message as text ('' when unreadable). */
function nameAndMessage(err) {
  const name = read(err, 'name');
  const message = read(err, 'message');
  return { ename: name ? safeText(name) : 'Error', evalue: message ? safeText(message) : '' };
}

/**
 * The stack of a thrown error when it has one, else the value inspected: never throws. (V8 builds
 * an error's stack when first read, from its message: a message that cannot be made text makes
 * reading it throw; then the name and message are what can be shown.)
 */
function thrownText(err) {
  const stack = read(err, 'stack');
  if (typeof stack === 'string' && stack !== '') return stack;
  if (util.types.isNativeError(err)) {
    const { ename, evalue } = nameAndMessage(err);
    return `${ename}: ${evalue}`;
  }
  return inspectText(err);
}

/**
 * ename/evalue/traceback; the stack is cut at the first kernel frame, the failing line shown first.
 * Any value may have been thrown: its properties are read once each, and a read or a conversion
 * that throws gives no text, never a failure of the kernel.
 */
function describeError(err, code, filename) {
  const stack = typeof err === 'object' ? read(err, 'stack') : undefined;
  if (typeof stack !== 'string' && util.types.isNativeError(err)) return { ...nameAndMessage(err), traceback: thrownText(err) };
  if (typeof stack !== 'string') {
    const text = inspectText(err);
    return { ename: 'Uncaught', evalue: text, traceback: `Uncaught ${text}` };
  }
  const lines = stack.split('\n');
  const kernelFrame = lines.findIndex(
    (l) => /^\s+at /.test(l) && !l.includes(filename) && (l.includes(__dirname) || /\(node:vm|node:internal\/vm|at Script\.runInContext/.test(l)),
  );
  let traceback = (kernelFrame >= 0 ? lines.slice(0, kernelFrame) : lines).join('\n');
  const where = new RegExp(`${filename}:(\\d+)(?::(\\d+))?`).exec(traceback);
  if (where && !/^\S+:\d+\n/.test(traceback)) {
    // Like Node's uncaught-error output: the failing line and a caret above the stack.
    const line = code.split('\n')[Number(where[1]) - 1];
    if (line !== undefined) traceback = `${filename}:${where[1]}\n${line}\n${' '.repeat(Math.max(0, Number(where[2] || 1) - 1))}^\n\n${traceback}`;
  }
  return { ...nameAndMessage(err), traceback };
}

module.exports = { NodeSession, ExitRequest, safeText, thrownText, isExitRequest };
