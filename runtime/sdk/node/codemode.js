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

/** One request on its own connection to the kernel: the reply's [value, cut], or a ToolError. */
function roundtrip(body) {
  const path = process.env.CODEMODE_TOOLS_SOCKET;
  if (!path) return Promise.reject(new ToolError('tool calls are not available here: this code does not run in a codemode sandbox', 'unavailable'));
  let data;
  try {
    data = frame({ ...body, callId: `n${++nextId}` });
  } catch (err) {
    return Promise.reject(new ToolError(`the arguments are not JSON: ${err.message}`, 'invalid'));
  }
  return new Promise((resolve, reject) => {
    const sock = net.connect(path);
    let buf = Buffer.alloc(0);
    let done = false;
    const finish = (fn) => {
      if (done) return;
      done = true;
      sock.destroy();
      fn();
    };
    sock.on('connect', () => sock.write(data));
    sock.on('data', (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      const nl = buf.indexOf(10);
      if (nl < 0) return;
      const size = Number(buf.subarray(0, nl).toString('latin1'));
      if (buf.length < nl + 1 + size) return;
      let reply;
      try {
        reply = JSON.parse(buf.subarray(nl + 1, nl + 1 + size).toString('utf8'));
      } catch {
        return finish(() => reject(new ToolError('the codemode kernel sent a bad answer', 'unavailable')));
      }
      if (reply && reply.ok === true) return finish(() => resolve([reply.value, reply.cut]));
      const e = (reply && reply.error) || {};
      finish(() => reject(new ToolError(String(e.message ?? 'the request failed'), String(e.kind ?? 'unavailable'), body.server, body.tool)));
    });
    sock.on('error', (err) => finish(() => reject(new ToolError(`cannot reach the codemode kernel: ${err.message}`, 'unavailable'))));
    sock.on('close', () => finish(() => reject(new ToolError('the codemode kernel closed the connection without an answer', 'unavailable'))));
  });
}

function jsonType(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

/** The same checks as the gateway's (src/codemode/args.ts). */
function checkArgs(schema, args) {
  if (!schema || typeof schema !== 'object') return [];
  const props = schema.properties && typeof schema.properties === 'object' ? schema.properties : {};
  const problems = (Array.isArray(schema.required) ? schema.required : []).filter((r) => !(r in args)).map((r) => `missing required argument "${r}"`);
  for (const [k, v] of Object.entries(args)) {
    const p = Object.hasOwn(props, k) ? props[k] : undefined;
    if (p === undefined) {
      if (schema.additionalProperties === false) problems.push(`unknown argument "${k}" (expected: ${Object.keys(props).join(', ') || 'none'})`);
      continue;
    }
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
