"""codemode: call the team's MCP tools from sandbox code. Standard library only (Python 3.8+).

    from codemode import mcp, call_tool, search, describe, servers, ToolError

    servers()                                   # [{"name": "github", "tools": 41}, ...]
    search("create issue", limit=5)             # ranked: [{"server", "tool", "signature", "summary"}]
    describe("github", "create_issue")          # full schema; detail="name" | "summary" | "full"
    mcp.github.create_issue(title="x")          # -> the result (dict, list, str, ...)
    call_tool("github", "create_issue", {"title": "x"})

One rule for sync and async: when an asyncio event loop is running in this thread (code that
uses `await`: a session cell with top-level await, an `async def`), every function here returns
an awaitable — `await` it, and `asyncio.gather` several to run them in parallel. Anywhere else it
blocks and returns the result.

Names: `mcp.my_server.get_sum` finds server "my-server" and tool "get_sum", or "get-sum" when
the server has no "get_sum"; `mcp["my-server"]["get-sum"]` names them exactly.

Results: the tool's structuredContent when present, else JSON parsed from its text, else the
text; images and other content are dicts. A result too large for the gateway's limit is cut
structurally (same shape, arrays shortened, strings ending in "…"): a dict gets a "_cut" key
first saying what was cut, and the same sentence goes to stderr. Arguments are checked against
the tool's input schema (required, types, enums) before the call leaves the sandbox. Any failure
raises ToolError: `.kind` is "tool" (the tool itself failed; the message is the upstream's),
"denied", "limit", "timeout", "invalid" or "unavailable".

In bash: `python3 -m codemode servers | search QUERY | describe SERVER [TOOL] | call SERVER TOOL
['{"json": "args"}' | key=value ...]` prints JSON; exit code 1 on a ToolError.
"""
import asyncio
import itertools
import json
import os
import socket
import sys
import threading

__all__ = ["mcp", "call_tool", "search", "describe", "servers", "ToolError", "display"]

_MAX_REPLY_BYTES = 64 * 1024 * 1024
_ids = itertools.count(1)
_cache = {}  # (server, tool) -> schema; server -> tool names
_cache_lock = threading.Lock()


class ToolError(Exception):
    """A tool call or discovery request failed; `kind` says how (see the module's doc)."""

    def __init__(self, message, kind="tool", server=None, tool=None):
        super().__init__(message)
        self.kind = kind
        self.server = server
        self.tool = tool


def _encode(message):
    try:
        body = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as err:
        raise ToolError("the arguments are not JSON: %s" % err, "invalid")
    return b"%d\n%s" % (len(body), body)


def _read_frame(sock):
    buf = bytearray()
    while b"\n" not in buf:
        chunk = sock.recv(4096)
        if not chunk:
            return None
        buf += chunk
        if len(buf) > 32 and b"\n" not in buf:
            return None
    head, _, rest = bytes(buf).partition(b"\n")
    if not head.isdigit() or int(head) > _MAX_REPLY_BYTES:
        return None
    size, body = int(head), bytearray(rest)
    while len(body) < size:
        chunk = sock.recv(min(1 << 20, size - len(body)))
        if not chunk:
            return None
        body += chunk
    return json.loads(bytes(body[:size]).decode("utf-8"))


class _Kept(threading.local):
    """This thread's connection to the kernel, kept between requests: a new connection costs
    the kernel an accept and a thread (~0.15 ms of a nested call's ~0.8 ms outside the upstream).
    One thread sends one request at a time on it, so replies come in order; `busy` while a request
    is out (a signal handler that calls a tool meanwhile uses a connection of its own), `pid` so a
    forked child never shares its parent's."""

    sock = None
    pid = None
    busy = False

    def drop(self):
        sock, self.sock = self.sock, None
        if sock is not None:
            sock.close()


_kept = _Kept()


def _connect(path):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        raise
    return sock


def _connection(path):
    """(socket, kept): this thread's kept connection when it is free, else a new one."""
    if _kept.busy:
        return _connect(path), False
    if _kept.sock is not None and _kept.pid != os.getpid():
        _kept.drop()  # the parent's, inherited through fork: the child closes only its own copy
    if _kept.sock is None:
        _kept.sock, _kept.pid = _connect(path), os.getpid()
    return _kept.sock, True


def _roundtrip(body):
    """One request to the kernel (on this thread's kept connection); the reply's value, or raises ToolError."""
    path = os.environ.get("CODEMODE_TOOLS_SOCKET")
    if not path:
        raise ToolError("tool calls are not available here: this code does not run in a codemode sandbox", "unavailable")
    body = dict(body, callId="c%d" % next(_ids))
    data = _encode(body)
    reply, kept, sock = None, False, None
    try:
        sock, kept = _connection(path)
        if kept:
            _kept.busy = True
        sock.sendall(data)
        reply = _read_frame(sock)
    except OSError as err:
        raise ToolError("cannot reach the codemode kernel: %s" % err, "unavailable")
    finally:
        if kept:
            _kept.busy = False
            # Anything but this request's own answer (an interruption mid-read, a closed or
            # malformed stream, the kernel's answer to a request it could not read, after which it
            # closes) leaves the connection unusable: the next request opens a new one.
            if not isinstance(reply, dict) or reply.get("callId") != body["callId"]:
                _kept.drop()
        elif sock is not None:
            sock.close()
    # "": the kernel's answer to a request it could not read (too large, not a frame).
    if not isinstance(reply, dict) or reply.get("callId") not in (body["callId"], ""):
        raise ToolError("the codemode kernel closed the connection without an answer", "unavailable")
    if reply.get("ok") is True:
        return reply.get("value"), reply.get("cut")
    err = reply.get("error") if isinstance(reply.get("error"), dict) else {}
    raise ToolError(str(err.get("message", "the request failed")), str(err.get("kind", "unavailable")), body.get("server"), body.get("tool"))


def _run(fn, *args):
    """The module's one rule: an awaitable inside a running event loop, else the result."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return fn(*args)
    return loop.run_in_executor(None, fn, *args)


def _json_type(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer()):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, (list, tuple)):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def _json(v):
    # As JSON.stringify writes it, so messages and enum comparisons match the gateway's (1 != true).
    try:
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return repr(v)


def check_args(schema, args):
    """Problems with `args` for a JSON Schema (required, basic types, enums, unknown keys when the
    schema forbids them); the gateway runs the same checks (src/codemode/args.ts)."""
    if not isinstance(schema, dict):
        return []
    props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    required = [r for r in schema.get("required") or [] if isinstance(r, str)]
    problems = ['missing required argument "%s"' % r for r in required if r not in args]
    for key, value in args.items():
        prop = props.get(key)
        if prop is None:
            if schema.get("additionalProperties") is False:
                names = list(props)
                expected = ", ".join(names[:20]) + (", …" if len(names) > 20 else "")
                problems.append('unknown argument "%s" (expected: %s)' % (key, expected or "none"))
            continue
        if not isinstance(prop, dict):
            continue
        types = prop.get("type")
        types = types if isinstance(types, list) else [types] if isinstance(types, str) else None
        actual = _json_type(value)
        if types and not any(t == actual or (t == "number" and actual == "integer") for t in types):
            problems.append('argument "%s" must be %s, not %s' % (key, " or ".join(types), actual))
        elif isinstance(prop.get("enum"), list) and _json(value) not in [_json(e) for e in prop["enum"]]:
            problems.append('argument "%s" must be one of %s' % (key, _json(prop["enum"])[:200]))
    return problems[:5]


def _with_cut(value, cut, label):
    if not cut:
        return value
    try:
        sys.stderr.write("codemode: %s: %s\n" % (label, cut))
    except Exception:
        pass
    if isinstance(value, dict):
        return dict([("_cut", cut)] + list(value.items()))
    return value


def _tool_names(server):
    with _cache_lock:
        names = _cache.get(server)
    if names is None:
        listed, _ = _roundtrip({"op": "describe", "server": server, "detail": "name"})
        names = [n.split(".", 1)[1] for n in listed if isinstance(n, str) and "." in n]
        with _cache_lock:
            _cache[server] = names
    return names


def _schema(server, tool):
    with _cache_lock:
        schema = _cache.get((server, tool))
    if schema is None:
        described, _ = _roundtrip({"op": "describe", "server": server, "tool": tool, "detail": "full"})
        schema = described.get("inputSchema") if isinstance(described, dict) else None
        with _cache_lock:
            _cache[(server, tool)] = schema or {}
    return schema


def _call(server, tool, args, loose_name=False):
    try:
        if loose_name and tool not in _tool_names(server):
            alt = tool.replace("_", "-")
            if alt in _tool_names(server):
                tool = alt
        schema = _schema(server, tool)
    except ToolError as err:
        if err.kind != "denied":
            raise
        # Still sent: the gateway refuses the call itself, and counts and records the refusal.
        schema = None
    problems = check_args(schema, args)
    if problems:
        raise ToolError("%s.%s: %s" % (server, tool, "; ".join(problems)), "invalid", server, tool)
    value, cut = _roundtrip({"op": "call", "server": server, "tool": tool, "args": args})
    return _with_cut(value, cut, "%s.%s" % (server, tool))


def call_tool(server, tool, args=None):
    """Calls `tool` of `server` with the dict `args` (see the module's doc for sync/async)."""
    if args is not None and not isinstance(args, dict):
        raise ToolError("args must be a dict of the tool's arguments", "invalid", server, tool)
    return _run(_call, server, tool, dict(args or {}))


def servers():
    """The upstream servers this program may call: [{"name", "tools", "description"?}]."""
    return _run(lambda: _roundtrip({"op": "servers"})[0])


def search(query, limit=10, detail="summary"):
    """Tools ranked by how well their names and descriptions match `query`."""
    return _run(lambda: _roundtrip({"op": "search", "query": query, "limit": limit, "detail": detail})[0])


def describe(server, tool=None, detail="full"):
    """One tool (or all of a server's tools) at detail "name", "summary" or "full" (with schemas)."""
    body = {"op": "describe", "server": server, "detail": detail}
    if tool is not None:
        body["tool"] = tool
    return _run(lambda: _roundtrip(body)[0])


class _Tool:
    def __init__(self, server, tool, loose):
        self._server, self._tool, self._loose = server, tool, loose

    def __call__(self, *args, **kwargs):
        if len(args) > 1 or (args and (kwargs or not isinstance(args[0], dict))):
            raise ToolError("call a tool with keyword arguments, or with one dict of arguments", "invalid", self._server, self._tool)
        return _run(_call, self._server, self._tool, dict(args[0]) if args else kwargs, self._loose)

    def __repr__(self):
        return "<tool %s.%s>" % (self._server, self._tool)


class _Server:
    def __init__(self, name):
        self._name = name

    def __getattr__(self, tool):
        if tool.startswith("__"):
            raise AttributeError(tool)
        return _Tool(self._name, tool, True)

    def __getitem__(self, tool):
        return _Tool(self._name, tool, False)

    def __repr__(self):
        return "<server %s>" % self._name


class _Servers:
    def __getattr__(self, server):
        if server.startswith("__"):
            raise AttributeError(server)
        return _Server(server.replace("_", "-"))  # server names never contain "_"

    def __getitem__(self, server):
        return _Server(server)

    def __repr__(self):
        return "<mcp: servers() lists the servers, search() finds tools>"


mcp = _Servers()

from .display import display  # noqa: E402  (images, HTML and tables; see display.py)
