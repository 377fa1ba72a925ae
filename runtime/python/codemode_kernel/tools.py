"""Nested tool calls (runtime/PROTOCOL.md, "Tool calls"): sandbox code asks the gateway to call an
upstream MCP tool while its exec/run is running.

The `codemode` module (runtime/sdk) connects to a second UNIX socket, `tools.sock` next to the
kernel's socket, and sends one framed request per connection. This relay checks it, tags it with
the running call's request id and a kernel-chosen callId, and sends it as a `call` frame on that
call's gateway connection; the gateway's `callResult` comes back through the server's reader
thread (deliver) and is passed to the waiting client. A narrow channel: only these requests, only
while a call runs, a bounded number at a time. Warm-run programs and bash session commands reach
it by path (same uid), as session code does; the gateway checks everything again.
"""
import collections
import os
import re
import socket
import threading

from .framing import FrameReader, ProtocolError, encode
from .hardening import accept_above_stdio

MAX_REQUEST_BYTES = 1024 * 1024 - 4096  # the gateway accepts call frames up to 1 MiB, with the fields added here
MAX_PENDING = 32  # the gateway answers more than 32 waiting calls of one request with an error
CALL_ID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
OPS = {
    "call": ("server", "tool", "args"),
    "servers": (),
    "search": ("query", "limit", "detail"),
    "describe": ("server", "tool", "detail"),
}
# How long the running call's tool requests wait for the call's own gateway after its stream went
# (a recall with "tools" takes the call over), before they are answered "not called" as when no
# gateway will make them. A gateway tries to reopen a broken stream for 30 s (OPEN_WAIT_MS in
# src/sandbox/deadlines.ts): twice that, so a gateway that comes back in time is always waited for.
HELD_GRACE_MS = 60_000
SDK_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "sdk")


def prepare_environment(argv):
    """Before anything starts: where the tools socket is and where the `codemode` module lives,
    in this process's environment, so session code, bash commands and run programs inherit it."""
    sock = None
    for i, a in enumerate(argv[:-1]):
        if a == "--socket":
            sock = argv[i + 1]
    if sock:
        os.environ["CODEMODE_TOOLS_SOCKET"] = os.path.join(os.path.dirname(os.path.abspath(sock)), "tools.sock")
        # Rich outputs (display.py): where codemode.display writes, and a Matplotlib backend that
        # never blocks and displays figures on plt.show() (harmless where Matplotlib is absent).
        os.environ["CODEMODE_DISPLAY_DIR"] = os.path.join(os.path.dirname(os.path.abspath(sock)), "display")
        os.environ["MPLBACKEND"] = "module://codemode.mpl_backend"
    for var, sub in (("PYTHONPATH", "python"), ("NODE_PATH", "node")):
        path = os.path.join(SDK_DIR, sub)
        old = os.environ.get(var)
        os.environ[var] = path + (os.pathsep + old if old else "")
    os.environ["PYTHONPATH"] += os.pathsep + PACKAGES_DIR


# Packages a session installs (install_packages; src/packages copies them in over the exec
# stream) land here. Made at start, when /workspace is writable: a directory missing at the first
# import is cached as absent by the import system, and installs must work without a restart.
PACKAGES_DIR = "/workspace/.packages/python"


def add_packages_dir(path):
    """Puts PACKAGES_DIR on `path` (sys.path) before the image's site-packages, as a user site
    would be: an installed package may be a newer version of a preinstalled one."""
    try:
        os.makedirs(PACKAGES_DIR, exist_ok=True)
    except OSError:
        pass
    at = next((i for i, p in enumerate(path) if p.endswith(("site-packages", "dist-packages"))), len(path))
    path.insert(at, PACKAGES_DIR)


# A tool request waiting for the gateway's answer: the client's send and its callId, the request id
# it went out under, and its frame while no gateway connection could take it (None once sent).
_Waiting = collections.namedtuple("_Waiting", "send client_id request_id held")


def _answer(call_id, kind, message):
    return {"callId": call_id, "ok": False, "error": {"kind": kind, "message": message}}


class ToolCalls:
    def __init__(self, path, held_grace_ms=HELD_GRACE_MS):
        self._path = path
        self._held_grace_s = held_grace_ms / 1000.0
        self._lock = threading.Lock()
        self._current = None  # (gateway connection, request id, key) of the running exec/run
        self._pending = {}  # kernel callId -> _Waiting
        self._next = 0

    def start(self):
        if not self._path:
            return
        try:
            os.unlink(self._path)
        except FileNotFoundError:
            pass
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            listener.bind(self._path)
        finally:
            os.umask(old)
        listener.listen(64)
        threading.Thread(target=self._accept, args=(listener,), name="codemode-tools", daemon=True).start()

    def begin(self, conn, request_id, key=None):
        with self._lock:
            self._current = (conn, request_id, key)

    def attach(self, conn, request_id, key):
        """A gateway whose stream broke while the call sent with `key` runs recalls it with
        "tools": from now on that call's tool requests go to `conn`, under the recall's id
        (PROTOCOL.md, "Recall"). A request sent on the broken stream may or may not have reached
        the gateway, so it is answered "unavailable" here; one held because the stream was already
        gone goes out now. Nothing happens when that call is not running."""
        with self._lock:
            if self._current is None or key is None or self._current[2] != key:
                return
            self._current = (conn, request_id, key)
            lost = self._take_sent()
            resend = []
            for kernel_id, waiting in list(self._pending.items()):
                resend.append(dict(waiting.held, id=request_id))
                self._pending[kernel_id] = waiting._replace(request_id=request_id, held=None)
        _fail_unknown(lost)
        for frame in resend:
            conn.send(frame)

    def without_gateway(self, key):
        """A recall without "tools" of the call sent with `key`, while that call's own stream is
        gone: the replica recalling it has no broker for it (the one that ran it stopped), so no
        gateway will make this call's tool requests. Held ones, and later ones, are answered
        "unavailable" at once instead of waiting for the call's timeout. A recall with "tools"
        still takes the route over afterwards (attach). Nothing happens when the call's stream is
        alive or that call is not running."""
        if key is not None:
            self._drop_route(lambda current: current[2] == key)

    def superseded(self):
        """Another call came (and was answered "busy") while this one runs without its own stream:
        a session call whose replica stopped is recalled by nobody, and its held tool requests
        would keep the session busy until the code's timeout. They, and later ones, are answered
        "unavailable" at once, as after a recall without "tools", so the code ends on its own and
        the session is free for the call that waits. A recall with "tools" (its own gateway,
        back) still takes the route over afterwards. Nothing happens while the stream is alive."""
        self._drop_route(lambda current: True)

    def _abandoned(self, current):
        """HELD_GRACE_MS after the stream of the call `current` went, no recall with "tools" took
        that call over and no other call came: a session call whose replica stopped, in a session
        nobody calls. Its held and later tool requests are answered "unavailable" now, as after a
        recall without "tools", instead of waiting for the code's timeout (up to an hour). A recall
        with "tools" still takes the route over afterwards. Nothing happens when that call has
        ended or was taken over (a new route is a new `current`)."""
        self._drop_route(lambda now: now is current)

    def _drop_route(self, matches):
        with self._lock:
            if self._current is None or not matches(self._current):
                return
            conn = self._current[0]
            if conn is not None and conn.alive:
                return
            self._current = (None, self._current[1], self._current[2])
            lost = self._take_sent()
            held, self._pending = list(self._pending.values()), {}
        _fail_unknown(lost)
        for w in held:
            w.send(_answer(w.client_id, "unavailable", NOT_CALLED))

    def lost(self, conn):
        """`conn` went away: the running call's requests sent on it can no longer be answered over
        it, so they fail now, as unknown (a recall with "tools" would answer them so, only later).
        Held ones, and later ones, wait for a recall, for at most HELD_GRACE_MS (_abandoned)."""
        with self._lock:
            current = self._current
            if current is None or current[0] is not conn:
                return
            lost = self._take_sent()
        _fail_unknown(lost)
        timer = threading.Timer(self._held_grace_s, self._abandoned, args=(current,))
        timer.daemon = True
        timer.start()

    def _take_sent(self):
        """Under the lock: the waiting requests that went out on a connection (not held), removed."""
        sent = [k for k, w in self._pending.items() if w.held is None]
        return [self._pending.pop(k) for k in sent]

    def end(self):
        """The call finished: what still waits gets an error (its code is over, or it runs in
        the background of a finished call)."""
        with self._lock:
            self._current = None
            left, self._pending = self._pending, {}
        for waiting in left.values():
            waiting.send(_answer(waiting.client_id, "unavailable", "the code's call ended before the tool answered"))

    def deliver(self, msg):
        """A callResult from the gateway (any connection: a forged one can only answer a call of
        the code that forged it)."""
        call_id = msg.get("callId")
        with self._lock:
            waiting = self._pending.get(call_id) if isinstance(call_id, str) else None
            # Only the answer under the id the request went out with (a held one went nowhere yet).
            if waiting is None or waiting.request_id != msg.get("id") or waiting.held is not None:
                return
            del self._pending[call_id]
        reply = {"callId": waiting.client_id, "ok": msg.get("ok") is True}
        for key in ("value", "cut", "error"):
            if key in msg:
                reply[key] = msg[key]
        waiting.send(reply)

    def _accept(self, listener):
        while True:
            try:
                sock = accept_above_stdio(listener)
            except OSError:
                continue
            threading.Thread(target=self._serve, args=(sock,), name="codemode-tool", daemon=True).start()

    def _serve(self, sock):
        lock = threading.Lock()
        me = threading.current_thread()

        def write(data):
            with lock:
                try:
                    sock.sendall(data)
                except OSError:
                    pass

        def send(message):
            # Answers come from the server's reader thread (deliver) too: a client that does not
            # read its answers must not stall it, and with it every frame of the stream. Its
            # answers wait in a thread of their own (the pod's memory and process cap bound them).
            data = encode(message)
            if threading.current_thread() is me:
                write(data)
            else:
                threading.Thread(target=write, args=(data,), name="codemode-tool-answer", daemon=True).start()

        reader = FrameReader(sock, MAX_REQUEST_BYTES)
        try:
            while True:
                msg = reader.read()
                if msg is None:
                    break
                self._forward(msg, send)
        except ProtocolError as err:
            send(_answer("", "invalid", "not a tool request: %s" % err))
        except OSError:
            pass
        finally:
            sock.close()

    def _forward(self, msg, send):
        call_id = msg.get("callId") if isinstance(msg, dict) else None
        if not isinstance(call_id, str) or not CALL_ID.match(call_id):
            send(_answer("", "invalid", 'a tool request needs a "callId" of 1-64 letters, digits, "_", "." or "-"'))
            return
        op = msg.get("op")
        if op not in OPS:
            send(_answer(call_id, "invalid", "unknown op %s; use %s" % (repr(op)[:60], ", ".join(sorted(OPS)))))
            return
        with self._lock:
            current = self._current
            if current is None:
                kind, reason = "unavailable", "tool calls work only while code runs in an execute_code call"
            elif current[0] is None:
                kind, reason = "unavailable", NOT_CALLED
            elif len(self._pending) >= MAX_PENDING:
                kind, reason = "limit", "more than %d tool calls are waiting at once" % MAX_PENDING
            else:
                reason = None
                self._next += 1
                kernel_id = "k%d" % self._next
                conn, request_id = current[0], current[1]
                frame = {"id": request_id, "type": "call", "callId": kernel_id, "op": op}
                for key in OPS[op]:
                    if key in msg:
                        frame[key] = msg[key]
                # The call's gateway stream is gone (it broke): held until the gateway recalls the
                # call over a new one (attach), or answered when the call ends.
                held = None if conn.alive else frame
                self._pending[kernel_id] = _Waiting(send, call_id, request_id, held)
        if reason is not None:
            send(_answer(call_id, kind, reason))
            return
        if held is None:
            conn.send(frame)


def _fail_unknown(sent):
    """Requests that went out on a connection that is gone: whether the gateway made them is unknown."""
    for w in sent:
        w.send(_answer(w.client_id, "unavailable", UNKNOWN_IF_RAN))


UNKNOWN_IF_RAN = "the gateway's stream broke while this tool call was on its way; whether the tool ran is unknown"
NOT_CALLED = "the gateway now following this code cannot make its tool calls (the replica that started it stopped, or the gateway has no upstream servers); the tool was not called"
