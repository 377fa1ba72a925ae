'use strict';
// Nested tool calls (runtime/PROTOCOL.md, "Tool calls"), as python/codemode_kernel/tools.py does
// them: the `codemode` module connects to tools.sock next to the kernel's socket and sends framed
// requests; this relay tags each with the running call's request id and a callId of its own and
// sends it on that call's gateway connection; the gateway's callResult comes back via deliver().
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { encode, FrameDecoder } = require('./framing.js');

const MAX_REQUEST_BYTES = 1024 * 1024 - 4096; // the gateway takes 1 MiB, with the fields added here
const MAX_PENDING = 32;
const CALL_ID = /^[A-Za-z0-9_.-]{1,64}$/;
const OPS = { call: ['server', 'tool', 'args'], servers: [], search: ['query', 'limit', 'detail'], describe: ['server', 'tool', 'detail'] };
const SDK_DIR = path.join(__dirname, '..', 'sdk');
// How long the running call's tool requests wait for the call's own gateway after its stream went
// (a recall with "tools" takes the call over), before they are answered "not called" as when no
// gateway will make them. A gateway tries to reopen a broken stream for 30 s (OPEN_WAIT_MS in
// src/sandbox/deadlines.ts): twice that, so a gateway that comes back in time is always waited for.
const HELD_GRACE_MS = 60_000;

/** Where the tools socket and the `codemode` modules are, for code and the programs it starts. */
function prepareEnvironment(socketPath) {
  process.env.CODEMODE_TOOLS_SOCKET = path.join(path.dirname(path.resolve(socketPath)), 'tools.sock');
  // Rich outputs (display.js): where the codemode module's display() writes.
  process.env.CODEMODE_DISPLAY_DIR = path.join(path.dirname(path.resolve(socketPath)), 'display');
  for (const [name, sub] of [
    ['NODE_PATH', 'node'],
    ['PYTHONPATH', 'python'],
  ]) {
    const old = process.env[name];
    process.env[name] = path.join(SDK_DIR, sub) + (old ? path.delimiter + old : '');
  }
  // require() in cells resolves global paths computed from NODE_PATH at start-up: recompute them.
  require('node:module')._initPaths();
}

const failure = (callId, kind, message) => ({ callId, ok: false, error: { kind, message } });

class ToolCalls {
  constructor(heldGraceMs = HELD_GRACE_MS) {
    this.heldGraceMs = heldGraceMs;
    this.current = null; // { conn, id, key } of the running exec
    // kernel callId -> { send, callId, id, held: the frame while no gateway stream could take it, or null once sent }
    this.pending = new Map();
    this.next = 0;
  }

  listen(socketPath) {
    try {
      fs.unlinkSync(socketPath);
    } catch {
      // none
    }
    const server = net.createServer((sock) => this.serve(sock));
    const umask = process.umask(0o177);
    server.listen(socketPath);
    process.umask(umask);
    server.unref();
  }

  begin(conn, id, key) {
    this.current = { conn, id, key: key ?? null };
  }

  /**
   * A gateway whose stream broke while the call sent with `key` runs recalls it with "tools": from
   * now on that call's tool requests go to `conn`, under the recall's `id` (PROTOCOL.md, "Recall").
   * A request sent on the broken stream may or may not have reached the gateway, so it is answered
   * "unavailable" here; one held because the stream was already gone goes out now. Nothing happens
   * when that call is not running.
   */
  attach(conn, id, key) {
    if (!this.current || key === undefined || key === null || this.current.key !== key) return;
    this.current = { conn, id, key };
    this.failSent();
    for (const p of this.pending.values()) {
      const frame = { ...p.held, id };
      p.id = id;
      p.held = null;
      conn.send(frame);
    }
  }

  /**
   * A recall without "tools" of the call sent with `key`, while that call's own stream is gone: the
   * replica recalling it has no broker for it (the one that ran it stopped), so no gateway will make
   * this call's tool requests. Held ones, and later ones, are answered "unavailable" at once instead
   * of waiting for the call's timeout. A recall with "tools" still takes the route over afterwards
   * (attach). Nothing happens when the call's stream is alive or that call is not running.
   */
  withoutGateway(key) {
    if (key !== undefined && key !== null) this.dropRoute((current) => current.key === key);
  }

  /**
   * Another call came (and was answered "busy") while this one runs without its own stream: a
   * session call whose replica stopped is recalled by nobody, and its held tool requests would keep
   * the session busy until the code's timeout. They, and later ones, are answered "unavailable" at
   * once, as after a recall without "tools", so the code ends on its own and the session is free
   * for the call that waits. A recall with "tools" (its own gateway, back) still takes the route
   * over afterwards. Nothing happens while the stream is alive.
   */
  superseded() {
    this.dropRoute(() => true);
  }

  /**
   * HELD_GRACE_MS after the stream of the call `current` went, no recall with "tools" took that call
   * over and no other call came: a session call whose replica stopped, in a session nobody calls.
   * Its held and later tool requests are answered "unavailable" now, as after a recall without
   * "tools", instead of waiting for the code's timeout (up to an hour). A recall with "tools" still
   * takes the route over afterwards. Nothing happens when that call has ended or was taken over (a
   * new route is a new `current`).
   */
  abandoned(current) {
    this.dropRoute((now) => now === current);
  }

  dropRoute(matches) {
    if (!this.current || !matches(this.current)) return;
    if (this.current.conn !== null && this.current.conn.alive()) return;
    this.current = { ...this.current, conn: null };
    this.failSent();
    const held = [...this.pending.values()];
    this.pending.clear();
    for (const p of held) p.send(failure(p.callId, 'unavailable', NOT_CALLED));
  }

  /**
   * `conn` went away: the running call's requests sent on it can no longer be answered over it, so
   * they fail now, as unknown (a recall with "tools" would answer them so, only later). Held ones,
   * and later ones, wait for a recall, for at most HELD_GRACE_MS (abandoned).
   */
  lost(conn) {
    if (!this.current || this.current.conn !== conn) return;
    this.failSent();
    const current = this.current;
    setTimeout(() => this.abandoned(current), this.heldGraceMs).unref();
  }

  /** Requests that went out on a connection now gone (not held): whether the gateway made them is unknown. */
  failSent() {
    for (const [kernelId, p] of [...this.pending]) {
      if (p.held !== null) continue;
      this.pending.delete(kernelId);
      p.send(failure(p.callId, 'unavailable', UNKNOWN_IF_RAN));
    }
  }

  end() {
    this.current = null;
    const left = [...this.pending.values()];
    this.pending.clear();
    for (const p of left) p.send(failure(p.callId, 'unavailable', "the code's call ended before the tool answered"));
  }

  deliver(msg) {
    const p = typeof msg.callId === 'string' ? this.pending.get(msg.callId) : undefined;
    // Only the answer under the id the request went out with (a held one went nowhere yet).
    if (!p || p.id !== msg.id || p.held !== null) return;
    this.pending.delete(msg.callId);
    const reply = { callId: p.callId, ok: msg.ok === true };
    for (const k of ['value', 'cut', 'error']) if (k in msg) reply[k] = msg[k];
    p.send(reply);
  }

  serve(sock) {
    const decoder = new FrameDecoder(MAX_REQUEST_BYTES);
    const send = (m) => {
      if (!sock.destroyed) sock.write(encode(m));
    };
    sock.on('data', (chunk) => {
      let messages;
      try {
        messages = decoder.push(chunk);
      } catch (err) {
        send(failure('', 'invalid', `not a tool request: ${err.message}`));
        sock.destroy();
        return;
      }
      for (const m of messages) this.forward(m, send);
    });
    sock.on('error', () => undefined);
  }

  forward(msg, send) {
    const callId = msg && typeof msg === 'object' ? msg.callId : undefined;
    if (typeof callId !== 'string' || !CALL_ID.test(callId))
      return send(failure('', 'invalid', 'a tool request needs a "callId" of 1-64 letters, digits, "_", "." or "-"'));
    const fields = Object.hasOwn(OPS, msg.op) ? OPS[msg.op] : undefined;
    if (!fields) return send(failure(callId, 'invalid', `unknown op ${String(JSON.stringify(msg.op)).slice(0, 60)}; use ${Object.keys(OPS).join(', ')}`));
    if (!this.current) return send(failure(callId, 'unavailable', 'tool calls work only while code runs in an execute_code call'));
    if (this.current.conn === null) return send(failure(callId, 'unavailable', NOT_CALLED));
    if (this.pending.size >= MAX_PENDING) return send(failure(callId, 'limit', `more than ${MAX_PENDING} tool calls are waiting at once`));
    const kernelId = `k${++this.next}`;
    const frame = { id: this.current.id, type: 'call', callId: kernelId, op: msg.op };
    for (const k of fields) if (k in msg) frame[k] = msg[k];
    // The call's gateway stream is gone (it broke): held until the gateway recalls the call over a
    // new one (attach), or answered when the call ends.
    const held = this.current.conn.alive() ? null : frame;
    this.pending.set(kernelId, { send, callId, id: this.current.id, held });
    if (held === null) this.current.conn.send(frame);
  }
}

const UNKNOWN_IF_RAN = "the gateway's stream broke while this tool call was on its way; whether the tool ran is unknown";
const NOT_CALLED = 'the gateway now following this code cannot make its tool calls (the replica that started it stopped, or the gateway has no upstream servers); the tool was not called';

module.exports = { ToolCalls, prepareEnvironment };
