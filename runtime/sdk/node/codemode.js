'use strict';
// codemode for Node: call the team's MCP tools from sandbox code. Built-ins only (Node 18+).
//
//   const { mcp, callTool, search, describe, servers, ToolError, display } = require('codemode');
//   await servers();                                   // [{ name, tools, description? }]
//   await search('create issue', { limit: 5 });        // ranked: [{ server, tool, signature, summary }]
//   await describe('github', 'create_issue');          // full schema; { detail: 'name'|'summary'|'full' }
//   await mcp.github.create_issue({ title: 'x' });     // one object of arguments
//   await callTool('github', 'create_issue', { title: 'x' });
//
// Every function returns a promise: always await (Promise.all runs calls in parallel). Names,
// results, cuts and ToolError kinds are as in the Python module (runtime/sdk/python/codemode):
// `mcp.my_server.get_sum` finds server "my-server" and tool "get_sum", or "get-sum" when there is
// no "get_sum"; arguments are checked against the input schema before the call leaves the sandbox.
const net = require('node:net');

class ToolError extends Error {
  constructor(message, kind = 'tool', server, tool) {
    super(message);
    this.name = 'ToolError';
    this.kind = kind;
    this.server = server;
    this.tool = tool;
  }
}

let nextId = 0;
const schemas = new Map();
const names = new Map();

function frame(message) {
  const body = Buffer.from(JSON.stringify(message), 'utf8');
  return Buffer.concat([Buffer.from(`${body.length}\n`, 'ascii'), body]);
}

const MAX_REPLY_BYTES = 64 * 1024 * 1024;
// A request larger than this goes on a connection of its own: the kernel closes a connection on
// a request it cannot read (above its 1 MiB − 4 KiB), which must not fail the requests beside it.
const OWN_CONNECTION_BYTES = 64 * 1024;

/**
 * A connection to the kernel carrying any number of requests at once; each answer goes to the
 * request with its callId. The process keeps one (`kept`) between requests: a new connection costs
 * the kernel an accept (~0.2 ms of a nested call, measured with the previous one per request). It
 * does not keep the process alive while no request waits on it (unref), so programs still exit.
 */
class Connection {
  constructor(path, onGone) {
    this.pending = new Map(); // callId -> { resolve, reject, body }
    this.chunks = [];
    this.size = 0;
    this.need = 0;
    this.gone = false;
    this.onGone = onGone;
    this.sock = net.connect(path);
    this.sock.unref();
    this.sock.on('data', (chunk) => this.receive(chunk));
    this.sock.on('error', (err) => this.end(`cannot reach the codemode kernel: ${err.message}`));
    this.sock.on('close', () => this.end('the codemode kernel closed the connection without an answer'));
  }

  request(body, data) {
    return new Promise((resolve, reject) => {
      if (this.gone) return reject(new ToolError('the codemode kernel closed the connection', 'unavailable'));
      if (this.pending.size === 0) this.sock.ref();
      this.pending.set(body.callId, { resolve, reject, body });
      this.sock.write(data);
    });
  }

  receive(chunk) {
    this.chunks.push(chunk);
    this.size += chunk.length;
    // The frame being read is not all here yet: wait without copying (a reply can be megabytes).
    if (this.size < this.need) return;
    let buf = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks, this.size);
    while (!this.gone && buf.length > 0) {
      const nl = buf.subarray(0, 33).indexOf(10);
      if (nl < 0) {
        if (buf.length > 32) return this.end('the codemode kernel sent a bad answer');
        return this.keep(buf, 0);
      }
      const head = buf.subarray(0, nl).toString('latin1');
      const size = Number(head);
      if (!/^\d+$/.test(head) || size > MAX_REPLY_BYTES) return this.end('the codemode kernel sent a bad answer');
      if (buf.length < nl + 1 + size) return this.keep(buf, nl + 1 + size);
      let reply;
      try {
        reply = JSON.parse(buf.subarray(nl + 1, nl + 1 + size).toString('utf8'));
      } catch {
        return this.end('the codemode kernel sent a bad answer');
      }
      buf = buf.subarray(nl + 1 + size);
      this.answer(reply);
    }
    this.keep(Buffer.alloc(0), 0);
  }

  /** `buf` starts the next frame, of `need` bytes when its header is known. */
  keep(buf, need) {
    this.chunks = buf.length > 0 ? [buf] : [];
    this.size = buf.length;
    this.need = need;
  }

  answer(reply) {
    const callId = reply && typeof reply === 'object' ? reply.callId : undefined;
    // "": the kernel's answer to a request it could not read; it closes the connection after it.
    const waiting = callId === '' ? [...this.pending.keys()] : this.pending.has(callId) ? [callId] : [];
    for (const id of waiting) {
      const { resolve, reject, body } = this.pending.get(id);
      this.pending.delete(id);
      if (reply.ok === true) resolve([reply.value, reply.cut]);
      else {
        const e = (reply.error && typeof reply.error === 'object' && reply.error) || {};
        reject(new ToolError(String(e.message ?? 'the request failed'), String(e.kind ?? 'unavailable'), body.server, body.tool));
      }
    }
    if (callId === '') this.end('the codemode kernel closed the connection');
    else if (this.pending.size === 0) this.sock.unref();
  }

  /** Unusable from now on: every request still waiting fails with `message`. */
  end(message) {
    if (this.gone) return;
    this.gone = true;
    this.onGone(this);
    this.sock.destroy();
    const left = [...this.pending.values()];
    this.pending.clear();
    for (const p of left) p.reject(new ToolError(message, 'unavailable'));
  }
}

let kept = null;

/** One request to the kernel: the reply's [value, cut], or a ToolError. */
function roundtrip(body) {
  const path = process.env.CODEMODE_TOOLS_SOCKET;
  if (!path) return Promise.reject(new ToolError('tool calls are not available here: this code does not run in a codemode sandbox', 'unavailable'));
  let data;
  body = { ...body, callId: `n${++nextId}` };
  try {
    data = frame(body);
  } catch (err) {
    return Promise.reject(new ToolError(`the arguments are not JSON: ${err.message}`, 'invalid'));
  }
  if (data.length > OWN_CONNECTION_BYTES) {
    const own = new Connection(path, () => undefined);
    const done = () => own.end('done');
    return own.request(body, data).finally(done);
  }
  kept ??= new Connection(path, (c) => {
    if (kept === c) kept = null;
  });
  return kept.request(body, data);
}

function jsonType(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

/** The first 20 argument names, as the gateway lists them after an unknown one. */
function expectedNames(props) {
  const keys = Object.keys(props);
  return keys.length === 0 ? 'none' : keys.slice(0, 20).join(', ') + (keys.length > 20 ? ', …' : '');
}

/** The same checks as the gateway's (src/codemode/args.ts). */
function checkArgs(schema, args) {
  if (!schema || typeof schema !== 'object') return [];
  const props = schema.properties && typeof schema.properties === 'object' ? schema.properties : {};
  // The schema is the upstream's, any JSON: names that are not strings and property schemas that
  // are not objects are skipped, as the gateway does.
  const problems = (Array.isArray(schema.required) ? schema.required : [])
    .filter((r) => typeof r === 'string' && !(r in args))
    .map((r) => `missing required argument "${r}"`);
  for (const [k, v] of Object.entries(args)) {
    const p = Object.hasOwn(props, k) ? props[k] : undefined;
    if (p === undefined) {
      if (schema.additionalProperties === false) problems.push(`unknown argument "${k}" (expected: ${expectedNames(props)})`);
      continue;
    }
    if (p === null || typeof p !== 'object') continue;
    const types = Array.isArray(p.type) ? p.type : typeof p.type === 'string' ? [p.type] : undefined;
    const t = jsonType(v);
    if (types && !types.some((x) => x === t || (x === 'number' && t === 'integer'))) problems.push(`argument "${k}" must be ${types.join(' or ')}, not ${t}`);
    else if (Array.isArray(p.enum) && !p.enum.some((e) => JSON.stringify(e) === JSON.stringify(v)))
      problems.push(`argument "${k}" must be one of ${JSON.stringify(p.enum).slice(0, 200)}`);
  }
  return problems.slice(0, 5);
}

function withCut(value, cut, label) {
  if (!cut) return value;
  process.stderr.write(`codemode: ${label}: ${cut}\n`);
  return value && typeof value === 'object' && !Array.isArray(value) ? { _cut: cut, ...value } : value;
}

async function toolNames(server) {
  if (!names.has(server)) {
    const [listed] = await roundtrip({ op: 'describe', server, detail: 'name' });
    names.set(
      server,
      (Array.isArray(listed) ? listed : []).map((n) => String(n).split('.').slice(1).join('.')),
    );
  }
  return names.get(server);
}

async function call(server, tool, args, loose) {
  if (args === undefined || args === null) args = {};
  if (typeof args !== 'object' || Array.isArray(args)) throw new ToolError('pass the arguments as one object', 'invalid', server, tool);
  let schema;
  try {
    if (loose && !(await toolNames(server)).includes(tool) && (await toolNames(server)).includes(tool.replace(/_/g, '-'))) tool = tool.replace(/_/g, '-');
    const key = `${server}\u0000${tool}`;
    if (!schemas.has(key)) {
      const [d] = await roundtrip({ op: 'describe', server, tool, detail: 'full' });
      schemas.set(key, (d && d.inputSchema) || {});
    }
    schema = schemas.get(key);
  } catch (err) {
    // Still sent when denied: the gateway refuses the call itself, and counts and records the refusal.
    if (!(err instanceof ToolError) || err.kind !== 'denied') throw err;
  }
  const problems = checkArgs(schema, args);
  if (problems.length) throw new ToolError(`${server}.${tool}: ${problems.join('; ')}`, 'invalid', server, tool);
  const [value, cut] = await roundtrip({ op: 'call', server, tool, args });
  return withCut(value, cut, `${server}.${tool}`);
}

const callTool = (server, tool, args) => call(server, tool, args, false);
const servers = async () => (await roundtrip({ op: 'servers' }))[0];
const search = async (query, { limit = 10, detail = 'summary' } = {}) => (await roundtrip({ op: 'search', query, limit, detail }))[0];
const describe = async (server, tool, { detail = 'full' } = {}) =>
  (await roundtrip({ op: 'describe', server, detail, ...(tool !== undefined && { tool }) }))[0];

// mcp.<server>.<tool>(args): attribute names are loose (_ → -), bracket names too (exact first).
const serverProxy = (server) =>
  new Proxy({}, { get: (_t, tool) => (typeof tool === 'string' && tool !== 'then' ? (args) => call(server, tool, args, true) : undefined) });
const mcp = new Proxy({}, { get: (_t, s) => (typeof s === 'string' && s !== 'then' ? serverProxy(s.replace(/_/g, '-')) : undefined) });

module.exports = { mcp, callTool, search, describe, servers, ToolError, checkArgs, display: require('./display.js').display };
