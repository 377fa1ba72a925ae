"""The kernel's UNIX socket server: many clients (one relay per gateway process), one call at a time.

Threads: an accept thread, one reader thread per connection (answers `ping` at once, even while a
call runs), and the main thread, which runs calls: Python's signals, and so the timeout
interrupt, only reach the main thread. A request that arrives while a call runs is answered at
once with status "error" / ename "KernelBusy" and "busy": true: the call did not start (nothing
waits in a queue here, so a caller's own timeout always covers exactly its own call; the gateway
waits for its turn and sends the call again).
"""
import argparse
import array
import json
import os
import queue
import socket
import sys
import threading
import time

from . import display
from .bounds import WORKSPACE_OVER_EXIT_CODE, WorkspaceGuard, bounded, workspace_limit
from .framing import FrameReader, ProtocolError, encode
from .hardening import above_stdio, accept_above_stdio, make_undumpable
from .oneshot import OneShot, check_run
from .tools import HELD_GRACE_MS, ToolCalls

DEFAULT_TIMEOUT_MS = 30000
DEFAULT_CAP_CHARS = 50000
# An exception's type name is kept to this many characters (the gateway keeps as many).
MAX_ENAME_CHARS = 200
EMPTY_OUTPUT = {"stdout": "", "stderr": "", "stdoutBytes": 0, "stderrBytes": 0, "truncated": False}


def log(message, **fields):
    # Kernel diagnostics go to the original stderr: in a sandbox pod a file in /tmp (its size limit
    # and the file limit bound it: a write may fail, and a log line is not worth a call). Never
    # code or output.
    try:
        os.write(LOG_FD, (json.dumps(dict(msg=message, **fields)) + "\n").encode("utf-8"))
    except OSError:
        pass


LOG_FD = 2


# The first byte a relay sends when it hands over its exec stream (relay.py), with the stream's
# stdin and stdout as SCM_RIGHTS. A frame starts with a digit, so the two cannot be confused.
ATTACH = b"A"


def _receive_attach(sock):
    """The first bytes a client sent, and the (stdin, stdout) it handed over, if it attached."""
    fd_size = array.array("i").itemsize
    # Close-on-exec: no program the kernel starts may inherit the stream the gateway reads.
    data, ancdata, _flags, _addr = sock.recvmsg(1 << 16, socket.CMSG_SPACE(2 * fd_size), getattr(socket, "MSG_CMSG_CLOEXEC", 0))
    fds = array.array("i")
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % fd_size])
    if data == ATTACH and len(fds) == 2:
        pipes = (above_stdio(fds[0]), above_stdio(fds[1]))
        for fd in pipes:
            os.set_blocking(fd, True)
        return b"", pipes
    for fd in fds:  # fds nobody asked for
        os.close(fd)
    return data, None


class Connection:
    """One client: a socket, or the exec stream's own pipes a relay handed over (`pipes`)."""

    def __init__(self, sock):
        self.sock = sock
        self._lock = threading.Lock()
        self._alive = True
        self._held = []
        self.pipes = None

    def attach(self, pipes):
        """From now on frames are read from pipes[0] and written to pipes[1]; the relay waits on the
        socket until close() (its exit ends the exec stream)."""
        self.pipes = pipes

    @property
    def alive(self):
        """False once the client went away (its stream ended, or a write to it failed)."""
        return self._alive

    def read(self, n):
        # Only the connection's reader thread reads and closes: the fd cannot close under it.
        pipes = self.pipes
        return os.read(pipes[0], n) if pipes else self.sock.recv(n)

    def close(self):
        """Under the send lock: a closed fd number may be reused by the next open() (user code's
        file), so no send may write to these after they are closed; later sends fail on the socket."""
        with self._lock:
            pipes, self.pipes = self.pipes, None
            self._alive = False
            for fd in pipes or ():
                try:
                    os.close(fd)
                except OSError:
                    pass
            self.sock.close()

    def _write(self, data):
        """Called under the send lock."""
        if not self.pipes:
            self.sock.sendall(data)
            return
        view = memoryview(data)
        while view:
            view = view[os.write(self.pipes[1], view):]

    def send(self, message, hold=False):
        """Thread-safe; a client that went away is ignored (the call still runs to its end).

        hold: keep the frame until the next send, which writes both at once. A call's last output
        and display frames are held for its result: one write reaches the gateway as one message
        through the relay and the exec stream, instead of one message per frame.
        """
        data = encode(message)
        with self._lock:
            if hold:
                self._held.append(data)
                return
            if self._held:
                self._held.append(data)
                data = b"".join(self._held)
                self._held = []
            if not self._alive:
                return
            try:
                self._write(data)
            except OSError:
                self._alive = False


def cap_error(result, cap):
    """The result with its exception texts cut to the call's cap, like its output: a user's
    exception can carry a message of any size, and the result frame must stay bounded."""
    error = result.get("error")
    if not isinstance(cap, int) or isinstance(cap, bool) or cap < 0:
        cap = DEFAULT_CAP_CHARS
    if not isinstance(error, dict):
        return result
    full = {k: str(error.get(k, "")) for k in ("ename", "evalue", "traceback")}
    capped = {
        "ename": full["ename"][:MAX_ENAME_CHARS],
        "evalue": full["evalue"][:cap],
        "traceback": full["traceback"][:cap],
    }
    if capped != full:
        # A cut text is reported like cut output: the traceback becomes the call's stderr.
        return dict(result, error=capped, truncated=True)
    return dict(result, error=capped)


def _describe(err):
    """repr(err), or its type's name when the repr fails (an exception class of the code's)."""
    try:
        return str.__str__(repr(err))
    except BaseException:  # noqa: B036
        return type.__dict__["__name__"].__get__(type(err))


def error_result(ename, evalue):
    return dict(status="error", durationMs=0, error={"ename": ename, "evalue": evalue, "traceback": ""}, **EMPTY_OUTPUT)


def busy_result():
    """The answer to a call that arrived while another ran. "busy" tells it apart from an exception
    the code raised (one named KernelBusy too): this call did not start."""
    return dict(error_result("KernelBusy", "another call is running in this session; retry when it has finished"), busy=True)


def not_isolated_result():
    """The answer to a call with "netcheck" in a pod that could still reach the network: the code
    did not start (the session keeps its state)."""
    return dict(
        error_result(
            "NetworkNotIsolated",
            "the sandbox pod could still reach the network %g s after the call arrived (its NetworkPolicy is not enforced), so the code was not run"
            % NETWORK_CHECK_SECONDS,
        ),
        notIsolated=True,
    )


def check_exec(msg):
    """The validated exec request with defaults, or raises ValueError saying what is wrong."""
    if not isinstance(msg.get("code"), str):
        raise ValueError('"code" must be a string')
    timeout = msg.get("timeoutMs", DEFAULT_TIMEOUT_MS)
    cap = msg.get("capChars", DEFAULT_CAP_CHARS)
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
        raise ValueError('"timeoutMs" must be a positive number')
    if not isinstance(cap, int) or isinstance(cap, bool) or cap < 0:
        raise ValueError('"capChars" must be a non-negative integer')
    if msg.get("stdin") is not None and not isinstance(msg["stdin"], str):
        raise ValueError('"stdin" must be a string')
    if msg.get("netcheck") is not None and not isinstance(msg["netcheck"], bool):
        raise ValueError('"netcheck" must be a boolean')
    return dict(msg, timeoutMs=timeout, capChars=cap)


# Seconds without a call after start before an idle kernel warms up (PythonSession.warm_up).
IDLE_WARM_UP_S = 0.5


def _end_for_workspace(files):
    """The session's /workspace went past its limit: the kernel ends with the status that says so
    (the container, and every process in it, with it; the gateway reads the status from the pod)."""
    log("Ending the session: /workspace is over its limit", files=files)
    os._exit(WORKSPACE_OVER_EXIT_CODE)


class KernelServer:
    def __init__(self, path, session, oneshot, undumpable=False, held_grace_ms=HELD_GRACE_MS):
        self._undumpable = undumpable
        self._path = path
        self._session = session
        self._oneshot = oneshot
        self._calls = queue.Queue()
        self._busy = threading.Lock()
        self._tools = ToolCalls(os.environ.get("CODEMODE_TOOLS_SOCKET"), held_grace_ms)
        self._display_dir = os.environ.get("CODEMODE_DISPLAY_DIR")
        self._figures = display.Figures()
        self._outcomes = Outcomes()
        # Watches a session's /workspace on disk from its first call on (a run has its own check).
        self._workspace_guard = WorkspaceGuard(workspace_limit(), _end_for_workspace)

    def serve_forever(self):
        listener = self._listen()
        self._tools.start()
        threading.Thread(target=self._accept, args=(listener,), name="codemode-accept", daemon=True).start()
        log("Started kernel", language=self._session.language, socket=self._path, pid=os.getpid(), undumpable=self._undumpable)
        # A kernel that no call reached soon after start (a pool pod, a session waiting for its
        # first call) does then what start-up put off; one that got a call at once (a cold run's
        # pod) never spends that CPU beside it.
        warm_up_at = IDLE_WARM_UP_S
        while True:
            try:
                conn, msg = self._calls.get(timeout=warm_up_at)
            except queue.Empty:
                warm_up_at = None
                self._session.warm_up()
                continue
            warm_up_at = None
            if msg["op"] in ("exec", "run") and self._display_dir:
                display.clear(self._display_dir)
            try:
                # After the gateway saw the NetworkPolicy restored: no code starts before this pod
                # has no network again (the CNI re-programs it a moment later).
                if msg["op"] in ("exec", "run") and msg.get("netcheck") is True and not network_isolated():
                    result = not_isolated_result()
                elif msg["op"] == "run":
                    result = self._oneshot.run(msg, conn.send)
                elif msg["op"] == "exec":
                    self._oneshot.discard()
                    self._workspace_guard.start()
                    result = bounded(self._session.execute, msg, conn.send)
                else:
                    self._session.reset()
                    result = dict(status="ok", durationMs=0, **EMPTY_OUTPUT)
            except BaseException as err:  # noqa: B036 - a kernel bug, or a signal handler the code installed: report it, keep serving
                what = _describe(err)
                log("Failed to run a call", error=what)
                result = error_result("KernelError", what)
            self._tools.end()
            items = self._displayed(msg)
            final = cap_error(result, msg.get("capChars", DEFAULT_CAP_CHARS))
            # Kept before the kernel is free: a recall never finds the next call running instead.
            answer_recalls = self._outcomes.finished(msg.get("key"), final, msg.get("proof"))
            # Free the kernel before replying, so a client's next request never sees it busy.
            self._busy.release()
            answer_recalls()
            try:
                for item in items:
                    conn.send(dict(item, id=msg["id"], type="display"), hold=True)
                conn.send(dict(final, id=msg["id"], type="result"))
            finally:
                # Off the call's path: the caller has its result (the next call waits for this).
                self._session.after_reply()

    def _displayed(self, msg):
        """The call's images, HTML and tables (display.py); a session's images are also saved."""
        if msg["op"] not in ("exec", "run") or not self._display_dir:
            return []
        try:
            figures = self._figures if msg["op"] == "exec" else None
            return display.collect(self._display_dir, display.limits_of(msg), msg.get("capChars", DEFAULT_CAP_CHARS), figures)
        except Exception as err:  # a kernel bug: the call's result still goes out
            log("Failed to collect display items", error=repr(err))
            return []

    def _listen(self):
        os.makedirs(os.path.dirname(self._path) or ".", mode=0o700, exist_ok=True)
        try:
            os.unlink(self._path)
        except FileNotFoundError:
            pass
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # the socket file is created 0600, with no window where it is wider
        try:
            listener.bind(self._path)
        finally:
            os.umask(old)
        listener.listen(16)
        return listener

    def _accept(self, listener):
        while True:
            sock = accept_above_stdio(listener)
            threading.Thread(target=self._serve, args=(Connection(sock),), name="codemode-conn", daemon=True).start()

    def _serve(self, conn):
        try:
            first, pipes = _receive_attach(conn.sock)
            if pipes:
                conn.attach(pipes)
            reader = FrameReader(conn.sock, read=conn.read, initial=first)
        except OSError:
            conn.close()
            return
        if not first and not pipes:  # the client left at once
            conn.close()
            return
        try:
            while True:
                msg = reader.read()
                if msg is None:
                    break
                self._dispatch(conn, msg)
        except ProtocolError as err:
            conn.send({"type": "error", "message": str(err)})
        except OSError:
            pass
        finally:
            conn.close()
            self._tools.lost(conn)

    def _dispatch(self, conn, msg):
        if not isinstance(msg, dict) or not isinstance(msg.get("id"), str):
            conn.send({"type": "error", "message": 'a request must be a JSON object with a string "id"'})
            return
        op, call_id = msg.get("op"), msg["id"]
        if op == "ping":
            busy = self._busy.locked()
            conn.send({"id": call_id, "type": "pong", "language": self._session.language, "busy": busy, "pid": os.getpid()})
            return
        if op == "callResult":  # the gateway's answer to a nested tool call (tools.py)
            self._tools.deliver(msg)
            return
        if op == "recall":  # the outcome of a run whose client went away (PROTOCOL.md, "Recall")
            waits = self._outcomes.recall(conn, call_id, msg.get("key"))
            # Asked with "tools": the running call's tool requests now go to this connection. After
            # the outcomes' lock: attach checks again that the call with this key still runs.
            if waits and msg.get("tools") is True:
                self._tools.attach(conn, call_id, msg.get("key"))
            elif waits:
                self._tools.without_gateway(msg.get("key"))
            return
        if op not in ("exec", "run", "reset"):
            conn.send(dict(error_result("ProtocolError", 'unknown op %s; use "exec", "run", "ping", "reset" or "recall"' % repr(op)[:100]), id=call_id, type="result"))
            return
        try:
            if op in ("exec", "run"):
                msg = check_exec(msg)
                check_key(msg.get("key"))
            if op == "run":
                check_run(msg)
        except ValueError as err:
            conn.send(dict(error_result("ProtocolError", str(err)), id=call_id, type="result"))
            return
        if not self._busy.acquire(blocking=False):
            self._tools.superseded()
            conn.send(dict(busy_result(), id=call_id, type="result"))
            return
        if op in ("exec", "run"):
            self._outcomes.started(msg.get("key"))
            # Here, not when the main thread takes the call: a recall that arrives before then
            # finds its tool calls' route (ToolCalls.attach). The last call's end() came before
            # the busy lock was released.
            self._tools.begin(conn, call_id, msg.get("key"))
        self._calls.put((conn, msg))


MAX_KEY_CHARS = 64


def check_key(key):
    if key is not None and (not isinstance(key, str) or not 0 < len(key) <= MAX_KEY_CHARS):
        raise ValueError('"key" must be a string of 1 to %d characters' % MAX_KEY_CHARS)


def not_found_result(key):
    """The answer to a recall of a key this kernel does not keep: it never ran it, or ran so many
    keyed calls after it that its result was let go (Outcomes)."""
    return dict(error_result("NotFound", "this kernel keeps no result with key %s" % key[:MAX_KEY_CHARS]), notFound=True)


class Outcomes:
    """The results of the last keyed `run`s and `exec`s, kept for a client that lost its connection
    before the result arrived (its exec stream broke, or its gateway replica stopped): it asks with
    `recall`, and a recall made while that call still goes on is answered when it ends. A pool pod
    serves one run; a session keeps the last KEPT_RESULTS calls' results, so one recovered after
    its replica stopped is still there after a few more calls (the oldest goes first, and once the
    kept texts pass KEPT_CHARS, older ones go too; the last always stays). Each is bounded like
    any result (capChars)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._running = None
        self._done = {}  # key -> result, oldest first
        self._chars = 0
        self._waiting = []  # (conn, request id)

    def started(self, key):
        with self._lock:
            self._running = key

    def finished(self, key, result, proof=None):
        """Keeps the call's result; returns a function that answers the recalls waiting for it,
        to be called once the kernel is free (a recaller's next call must not find it busy). The
        call's `proof` is kept with it and shown in recall answers only: a gateway believes an
        answer about a run only with the proof it sent that run, which no other pod has."""
        if isinstance(proof, str) and 0 < len(proof) <= MAX_PROOF_CHARS:
            result = dict(result, proof=proof)
        with self._lock:
            self._running = None
            if key is None:
                return lambda: None
            self._keep(key, result)
            waiting, self._waiting = self._waiting, []

        def answer():
            for conn, call_id in waiting:
                conn.send(dict(result, id=call_id, type="result"))

        return answer

    def _keep(self, key, result):
        """Under the lock."""
        old = self._done.pop(key, None)
        if old is not None:
            self._chars -= result_chars(old)
        self._done[key] = result
        self._chars += result_chars(result)
        while len(self._done) > 1 and (len(self._done) > KEPT_RESULTS or self._chars > KEPT_CHARS):
            oldest = next(iter(self._done))
            self._chars -= result_chars(self._done.pop(oldest))

    def recall(self, conn, call_id, key):
        """Answers now, or when the call with `key` ends; True when it waits for that end."""
        try:
            check_key(key)
            if key is None:
                raise ValueError('"key" is required')
        except ValueError as err:
            conn.send(dict(error_result("ProtocolError", str(err)), id=call_id, type="result"))
            return False
        with self._lock:
            answer = self._done.get(key)
            if answer is None and self._running == key:
                # Bounded: every waiter is a request of its own; a client that floods recalls only
                # waits on its own connection.
                if len(self._waiting) >= MAX_RECALL_WAITERS:
                    answer = dict(error_result("KernelBusy", "too many recalls are waiting for this run"), busy=True)
                else:
                    self._waiting.append((conn, call_id))
                    return True
        conn.send(dict(answer if answer is not None else not_found_result(key), id=call_id, type="result"))
        return False


MAX_RECALL_WAITERS = 16
MAX_PROOF_CHARS = 64
KEPT_RESULTS = 16
KEPT_CHARS = 2_000_000


def result_chars(result):
    """What a kept result holds in text (its output and error texts)."""
    error = result.get("error")
    n = len(result.get("stdout") or "") + len(result.get("stderr") or "")
    if isinstance(error, dict):
        n += sum(len(str(error.get(k) or "")) for k in ("ename", "evalue", "traceback"))
    return n
NETWORK_CHECK_SECONDS = 10.0
# A cold run's code waits for this check (kube-router enforces the policy ~50-70 ms after the pod's
# Running status): checking every 50 ms cost ~25 ms per cold run, every 10 ms ~5, at up to 100
# connects a second to the API server's Service while a new pod waits for its policy
# (docs/performance.md, 2026-12-03 15:00-16:06). After the first 2 s (a CNI slower than that, or none
# enforcing) every 50 ms: a pod that never loses its network makes ~360 connects, not 1,000.
NETWORK_CHECK_INTERVAL_S = (0.01, 0.05, 2.0)  # first, then, from this many seconds on


def network_isolated(limit=NETWORK_CHECK_SECONDS):
    """True once the pod cannot connect to the API server's Service (refused, or no answer within
    0.3 s), checked every 10 ms (after 2 s every 50 ms) for at most `limit` seconds. Only with
    CODEMODE_NETWORK_CHECK=1 (sandbox pods): some CNIs program a new pod's NetworkPolicy a moment
    after it started, and no code may run in that moment. The gateway reaches the kernel through
    exec, not the network."""
    host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
    if os.environ.get("CODEMODE_NETWORK_CHECK") != "1" or not host:
        return True
    try:
        port = int(os.environ.get("KUBERNETES_SERVICE_PORT", "443") or "443")
    except ValueError:
        port = 443
    start = time.monotonic()
    deadline = start + limit
    first, then, switch = NETWORK_CHECK_INTERVAL_S
    while True:
        reached = False
        try:
            with socket.create_connection((host, port), timeout=0.3):
                reached = True
        except OSError:
            pass
        if not reached:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(first if time.monotonic() - start < switch else then)


def preimport_quietly(names):
    """Imports a profile's modules into this process (a session's `import pandas` is then instant).

    Before the session's capture pipes exist; what the modules print goes nowhere, and a module
    that fails to import is skipped (logged by name only).
    """
    if not names:
        return
    import importlib
    saved = os.dup(1), os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    try:
        for name in names:
            try:
                importlib.import_module(name)
            except BaseException as err:  # noqa: B036 - an import may raise anything, even SystemExit
                log("Could not pre-import a module", module=name, error=type(err).__name__)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (null,) + saved:
            os.close(f)


def main(argv):
    global LOG_FD
    parser = argparse.ArgumentParser(description="codemode session kernel (runtime/README.md)")
    parser.add_argument("--socket", required=True, help="UNIX socket path, e.g. /tmp/.codemode/kernel.sock")
    parser.add_argument("--language", choices=("python", "bash"), default="python")
    parser.add_argument("--prestart", action="store_true", help="start a python3 interpreter ahead for one \"run\" (warm pool pods)")
    parser.add_argument("--preimport", default="", help="comma-separated python modules imported before any code (a profile's)")
    parser.add_argument(
        "--held-grace-ms",
        type=int,
        default=HELD_GRACE_MS,
        help="how long a call's tool requests wait for a recall after its stream went (PROTOCOL.md, \"Recall\")",
    )
    args = parser.parse_args(argv)
    preimport = tuple(m for m in args.preimport.split(",") if m)
    # Keep the real stderr for diagnostics: in Python mode fds 1/2 become the capture pipes.
    LOG_FD = os.dup(2)
    undumpable = make_undumpable()
    os.makedirs(os.path.dirname(args.socket) or ".", mode=0o700, exist_ok=True)
    if os.environ.get("CODEMODE_DISPLAY_DIR"):
        os.makedirs(os.environ["CODEMODE_DISPLAY_DIR"], mode=0o700, exist_ok=True)
    if args.language == "bash":
        from .bash_session import BashSession
        session = BashSession(os.path.dirname(os.path.abspath(args.socket)))
    else:
        from .python_session import PythonSession
        preimport_quietly(preimport)
        session = PythonSession(LOG_FD)
    sys.dont_write_bytecode = False  # see kernel.py
    # A run's interpreter (--prestart) starts while the network check below waits, not after it:
    # it only reads its code from a pipe, which nothing fills before a call reaches this process,
    # and no call can before the socket exists. A cold run's call comes ~5-10 ms after the check.
    oneshot = OneShot(args.prestart, preimport)
    # Before the socket exists: no call reaches the interpreter while the pod still has network.
    if not network_isolated():
        log("Refused to start: the pod could still reach the network (its NetworkPolicy is not enforced)")
        oneshot.discard()
        sys.exit(3)
    try:
        KernelServer(args.socket, session, oneshot, undumpable, max(0, args.held_grace_ms)).serve_forever()
    except KeyboardInterrupt:
        sys.exit(130)
