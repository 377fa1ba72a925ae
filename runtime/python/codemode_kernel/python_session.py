"""The Python session: one persistent namespace, notebook-style calls, fd-level output capture.

- State: one `__main__` module namespace for the kernel's life (variables, imports, functions,
  classes), registered as sys.modules["__main__"] so pickle and dataclasses find user classes.
- A call whose last statement is an expression returns that expression's repr (None: no result).
- Top-level `await` runs on one persistent event loop (background tasks advance only while a
  later call runs the loop, as in a notebook).
- Output: fds 1 and 2 are pipes for the kernel's whole life (see output.py); sys.stdout and
  sys.stderr are line-buffered writers on them, so `print` and `os.system("echo hi")` keep their
  relative order line by line.
- Timeout: see watchdog.py and interrupt() below.
"""
import _signal
import ast
import builtins
import errno
import io
import linecache
import os
import signal
import sys
import tempfile
import threading
import time
import traceback
import types

from . import procs
from .hardening import above_stdio
from .output import CallOutput, Pump, marker, new_token
from .watchdog import INTERRUPT_GRACE_S, Watchdog

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
SYNC_TIMEOUT_S = 2.0
FAST_SWITCH_S = 0.0001  # GIL switch interval while a timed-out call is being stopped
# inspect.CO_COROUTINE (a code object flag), without importing inspect at start-up.
CO_COROUTINE = 0x0080


class CallTimeout(BaseException):
    """Raised in the main thread when a call runs past its timeout (BaseException: `except
    Exception` in user code does not swallow it)."""


CallTimeout.__module__ = "builtins"  # tracebacks end in "CallTimeout: ...", not a kernel path


def _display(*objs, **kwargs):
    """codemode.display in every session namespace, as in a notebook (imported on first use)."""
    from codemode.display import display

    return display(*objs, **kwargs)


def _flush_figures():
    """Figures the call left open come back as images (codemode.display), as a notebook shows them."""
    if "matplotlib.pyplot" not in sys.modules:
        return
    try:
        from codemode.display import show_figures

        show_figures()
    except Exception as err:
        sys.stderr.write("codemode: could not render the open figures: %s: %s\n" % (type(err).__name__, err))


def _result_text(value):
    """A pandas DataFrame or Series as a compact table; anything else as its repr()."""
    if _safe(lambda: type(value).__module__, "").startswith("pandas"):
        try:
            from codemode.display import table_text

            table = table_text(value)
            if table is not None:
                return table
        except ImportError:
            pass
    return repr(value)


def new_namespace():
    module = types.ModuleType("__main__")
    module.__dict__["__builtins__"] = __builtins__
    module.__dict__["display"] = _display
    sys.modules["__main__"] = module
    return module.__dict__


class PythonSession:
    language = "python"

    def __init__(self, log_fd):
        self._log = open(log_fd, "w", closefd=False)
        self._pid = os.getpid()
        self._main_thread = threading.main_thread().ident
        self._calls = 0
        self._in_user_code = False
        self._interrupting = False
        self._plumb_fds()
        # asyncio is imported with the first loop (_event_loop): its ~20 ms are not a kernel's
        # start-up, which a cold run waits for and never needs it.
        self._loop = None
        self._builtins = dict(builtins.__dict__)  # as the code found them (reset)
        self.ns = new_namespace()
        signal.signal(signal.SIGINT, self._on_sigint)
        self._watchdog = Watchdog(self._log)
        self._watchdog.start()

    def _plumb_fds(self):
        out_r, self._out_w = os.pipe()
        err_r, self._err_w = os.pipe()
        self._devnull = above_stdio(os.open(os.devnull, os.O_RDONLY))  # fd 0 comes from this copy
        _dup2(self._devnull, 0)
        os.dup2(self._out_w, 1)
        os.dup2(self._err_w, 2)
        self._writers = ()
        self._restore_streams()
        self._pump = Pump({"stdout": out_r, "stderr": err_r})
        self._pump.start()

    def _restore_streams(self):
        """sys.stdout and sys.stderr become the kernel's writers on fds 1 and 2 again (new ones
        when the code closed them). The kernel flushes these after each call, whatever the code
        assigns to sys.stdout and sys.stderr (objects of its own, whose flush is its code)."""
        own = []
        for name, fd in (("stdout", 1), ("stderr", 2)):
            writer = self._writers[fd - 1] if self._writers else None
            if writer is None or writer.closed:
                writer = open(fd, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False)
            setattr(sys, name, writer)
            own.append(writer)
        self._writers = (own[0], own[1], sys.__stdout__, sys.__stderr__)

    def reset(self):
        """A fresh namespace and event loop, and the process-wide Python state the code may have
        patched undone: sys.stdout/stderr and builtins (a patched print would outlive the reset)."""
        self.ns = new_namespace()
        self._restore_streams()
        current = builtins.__dict__
        current.update(self._builtins)  # no moment without a builtin: the kernel's threads use them
        for name in [n for n in current if n not in self._builtins]:
            del current[name]
        if self._loop is not None:
            self._loop.close()
            self._loop = None

    def _event_loop(self):
        """The session's asyncio loop (top-level await), made on first use, and again when the
        code closed it (every later await would fail until a reset)."""
        if self._loop is None or self._loop.is_closed():
            import asyncio

            self._loop = asyncio.new_event_loop()
        return self._loop

    def after_reply(self):
        """What a call leaves for after its result was sent: cancelling its last-resort timer."""
        self._watchdog.release()

    def warm_up(self):
        """An idle kernel's chance to do what it put off at start-up (server.py), so that a
        session's first call costs what later ones do."""
        self._event_loop()

    def execute(self, req, send):
        started = time.monotonic()
        self._calls += 1
        call = CallOutput(req["id"], req["capChars"], send)
        timeout_s = req["timeoutMs"] / 1000.0
        since = procs.now_ticks()
        # Undo what an earlier call may have done to the process-wide plumbing.
        self._restore_stdio()
        sys.stdin = io.StringIO(req.get("stdin") or "")
        # An earlier call (or a library it used) may have replaced the handler the timeout needs.
        signal.signal(signal.SIGINT, self._on_sigint)
        stdin_file = self._child_stdin(req.get("stdin"))
        # A thread of an earlier call may have left a partial line in the writers (print(x, end="")
        # after its call ended): out now, before the start marker, so that it is not this call's.
        for writer in self._writers:
            try:
                writer.flush()
            except Exception:  # closed by the code
                pass
        start = new_token()
        self._pump.attach(call, start)
        os.write(self._out_w, marker(start))
        os.write(self._err_w, marker(start))
        killed = []
        switch = []  # the switch interval to restore, once interrupt() shortened it

        def interrupt():
            first = not self._interrupting
            self._interrupting = True
            # Signal first: the /proc scan below is slow while a busy main thread holds the GIL,
            # and quick once the main thread has stopped.
            signal.pthread_kill(self._main_thread, signal.SIGINT)
            if first:  # end what the call started, so a wait on it (e.g. os.system) returns
                # Every syscall of the scan hands the GIL back to a spinning main thread, which
                # keeps it a whole switch interval (5 ms): shorten it until the call is over.
                switch.append(sys.getswitchinterval())
                sys.setswitchinterval(FAST_SWITCH_S)
                killed.extend(procs.kill_started_since(os.getpid(), since))

        def give_up():
            sys.setswitchinterval(FAST_SWITCH_S)
            self._pump.detach()
            call.finish()
            send(dict(id=req["id"], type="result", status="lost", durationMs=_ms(started), **call.result_fields(),
                      error={"ename": "KernelLost", "evalue": "the call could not be interrupted within %.0f s of its timeout" % INTERRUPT_GRACE_S, "traceback": ""}))
            procs.kill_started_since(os.getpid(), since)
            os._exit(3)

        job = self._watchdog.arm(timeout_s, interrupt, give_up)
        try:
            outcome = self._run(req["code"], "<cell-%d>" % self._calls, req["capChars"])
            self._flush_streams()
            self._guard_handlers()
            if os.getpid() != self._pid:
                _end_forked_child(0 if outcome["status"] == "ok" else 1)
        finally:
            self._watchdog.disarm()
            self._interrupting = False
            if switch:
                sys.setswitchinterval(switch[0])
            # At once: no descriptor the kernel opens between calls (a relay's stream) may take
            # the number of one the code closed, which the next call would put a pipe on.
            self._restore_stdio()
            if stdin_file is not None:
                stdin_file.close()
        self._sync_output()
        call.finish()
        if killed:
            procs.reap(killed)
        if job.fired:
            outcome["status"] = "timeout"
            if outcome.get("error", {}).get("ename") != "CallTimeout":
                outcome.pop("error", None)
            outcome.pop("result", None)
        fields = call.result_fields()
        if outcome.pop("resultTruncated", False):
            fields["truncated"] = True
        return dict(durationMs=_ms(started), **fields, **outcome)

    def _restore_stdio(self):
        """fds 0, 1 and 2 as the kernel keeps them: /dev/null and the capture pipes. From copies
        the kernel holds: code that used up its descriptors (files it keeps open) still gets its
        next call, to close them in."""
        try:
            _dup2(self._devnull, 0)
        except OSError:  # the code closed the kernel's copy
            self._devnull = above_stdio(os.open(os.devnull, os.O_RDONLY))
            _dup2(self._devnull, 0)
        _dup2(self._out_w, 1)
        _dup2(self._err_w, 2)

    def _child_stdin(self, text):
        """Child processes read the call's `stdin` from fd 0 too (otherwise /dev/null)."""
        if not text:
            return None
        f = tempfile.TemporaryFile()
        f.write(text.encode("utf-8", "surrogatepass"))  # a lone surrogate as the bytes it names (bash_session.py)
        f.seek(0)
        os.dup2(f.fileno(), 0)
        return f

    def _guard_handlers(self):
        """A signal handler the code installed also runs between calls (an alarm it left set) and
        in the kernel's own code around a call: what it raises there is dropped, so that it can
        neither end the kernel nor cut a reply short. Inside the code it raises as before."""
        for sig in _HANDLED_SIGNALS:
            handler = _signal.getsignal(sig)  # the C function: signal.getsignal costs 13 times as much
            if callable(handler) and type(handler) is not _Guarded:
                try:
                    signal.signal(sig, _Guarded(handler, self))
                except (OSError, ValueError):
                    pass

    def _flush_streams(self):
        """Flushes sys.stdout and sys.stderr as the code's: they may be objects of its own, whose
        flush may raise anything or never return. The timeout covers it; what it raises is dropped."""
        try:
            self._in_user_code = True
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except BaseException:  # noqa: B036 - also a CallTimeout: the next stream still gets its turn
                    pass
        except BaseException:  # noqa: B036 - a CallTimeout between the statements above
            pass
        finally:
            self._in_user_code = False

    def _sync_output(self):
        for stream in self._writers:
            try:
                stream.flush()
            except Exception:  # the code may have closed them; nothing to flush then
                pass
        token = new_token()
        self._pump.expect(token)
        try:
            os.write(self._out_w, marker(token))
            os.write(self._err_w, marker(token))
        except OSError:
            pass
        self._pump.drain(token, SYNC_TIMEOUT_S)
        self._pump.detach()

    def _on_sigint(self, signum, frame):
        # Only our watchdog sends SIGINT, and only user code may be interrupted.
        if self._in_user_code and self._interrupting:
            raise CallTimeout("the call ran past its timeout and was interrupted")

    def _run(self, code, filename, cap):
        """Runs one cell; returns {"status", "result"?, "error"?}."""
        try:
            tree = ast.parse(code, filename, "exec")
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                last = ast.Expression(tree.body.pop().value)
            flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
            body = compile(tree, filename, "exec", flags=flags, dont_inherit=True)
            expr = compile(last, filename, "eval", flags=flags, dont_inherit=True) if last else None
        except (SyntaxError, ValueError, OverflowError, RecursionError, MemoryError) as err:
            return {"status": "error", "error": _error(err)}
        # Tracebacks and inspect show the cell's source lines (mtime None: never invalidated).
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        import asyncio  # imported by _event_loop: a lookup

        asyncio.set_event_loop(self._event_loop())
        try:
            try:
                self._in_user_code = True
                self._eval(body)
                value = self._eval(expr) if expr else None
                _flush_figures()  # inside the call: its timeout covers rendering too
                # The value's repr is the code's too (a large or slow one): the timeout covers it,
                # and interrupts it like the code, instead of the kernel giving up (lost).
                text = None if value is None else _plain(_result_text(value), "")
            finally:
                self._in_user_code = False
        except CallTimeout as err:
            return {"status": "timeout", "error": _error(err)}
        except SystemExit as err:
            if os.getpid() != self._pid:
                _end_forked_child(_exit_status(err))
            self._flush_after_error()
            if _exit_ok(err):
                return {"status": "ok"}
            return {"status": "error", "error": _error(err)}
        except BaseException as err:
            self._flush_after_error()
            return {"status": "error", "error": _error(err)}
        if text is None:
            return {"status": "ok"}
        return {"status": "ok", "result": text[:cap], "resultTruncated": len(text) > cap}

    def _flush_after_error(self):
        """A cell that failed still shows the figures it drew (as a notebook does); still
        interruptible by the call's timeout, which then just ends the rendering."""
        try:
            self._in_user_code = True
            _flush_figures()
        except BaseException:
            pass
        finally:
            self._in_user_code = False

    def _eval(self, code):
        value = eval(code, self.ns)
        if not code.co_flags & CO_COROUTINE:
            return value
        loop = self._event_loop()
        task = loop.create_task(value)
        try:
            return loop.run_until_complete(task)
        finally:
            if not task.done():
                # Interrupted: cancel the cell's task so it does not resume in a later call.
                task.cancel()
                try:
                    loop.run_until_complete(task)
                except BaseException:
                    pass


# Every signal a handler can be set for, except SIGINT (the timeout's, the kernel's own).
_HANDLED_SIGNALS = [int(s) for s in signal.valid_signals() if s not in (signal.SIGINT, signal.SIGKILL, signal.SIGSTOP)]


class _Guarded:
    """A handler of the code's that raises only into the code (PythonSession._guard_handlers)."""

    def __init__(self, handler, session):
        self.handler = handler
        self._session = session

    def __call__(self, signum, frame):
        if self._session._in_user_code:
            return self.handler(signum, frame)
        try:
            self.handler(signum, frame)
        except BaseException:  # noqa: B036 - nothing of the code's to raise into
            pass


def _dup2(fd, target):
    """os.dup2, waiting out EBUSY: Linux answers it while another thread's accept() or recvmsg()
    is installing a descriptor at `target` (a number the code closed)."""
    for _ in range(100):
        try:
            return os.dup2(fd, target)
        except OSError as err:
            if err.errno != errno.EBUSY:
                raise
            time.sleep(0.001)
    return os.dup2(fd, target)


def _ms(started):
    return int((time.monotonic() - started) * 1000)


def _plain(text, fallback):
    """`text` as a plain str; `fallback` when it is none. A str subclass (what __str__ or
    __repr__ may return) could answer slicing and len() with anything: the result would carry it."""
    try:
        return str.__str__(text) if isinstance(text, str) else fallback
    except BaseException:  # noqa: B036 - isinstance may run the code's __class__
        return fallback


def _safe(read, fallback):
    """read()'s text, or `fallback` when it raises anything (the code's __str__ may raise SystemExit)."""
    try:
        return _plain(read(), fallback)
    except BaseException:  # noqa: B036
        return fallback


def _exit_ok(err):
    """True when a SystemExit means success (code None or 0), read without running the code's
    own code (a `code` property, an __eq__ that raises)."""
    code = _safe_get(SystemExit.__dict__["code"], err)
    return code is None or (type(code) in (int, bool) and code == 0)


def _exit_status(err):
    """The process exit status a SystemExit stands for, as the interpreter maps it."""
    code = _safe_get(SystemExit.__dict__["code"], err)
    if code is None:
        return 0
    return code & 0xFF if type(code) in (int, bool) else 1


def _end_forked_child(status):
    """A child the code forked (os.fork) without ending it came back to the kernel: it ends here,
    like a child of multiprocessing. Going on, it would send the call's result a second time (its
    own, which may arrive first), take the parent's output from the shared pipes, and then wait for
    calls forever, holding the exec stream open."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: B036
            pass
    os._exit(status)


def _safe_get(descriptor, obj):
    try:
        return descriptor.__get__(obj)
    except BaseException:  # noqa: B036
        return None


def _error(err):
    """ename/evalue/traceback, the traceback starting at the first cell frame, without kernel frames.

    Whatever the exception's class does (a __str__ that raises SystemExit or returns a non-str, a
    metaclass __name__), the texts are plain str and reading them raises nothing."""
    cls = type(err)
    ename = _safe(lambda: type.__dict__["__name__"].__get__(cls), "BaseException")
    evalue = _safe(lambda: str(err), "<exception str() failed>")
    tb = _safe_get(BaseException.__dict__["__traceback__"], err)
    try:
        while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<cell-"):
            tb = tb.tb_next
        frames = []
        while tb is not None:
            if not tb.tb_frame.f_code.co_filename.startswith(_PACKAGE_DIR):
                frames.append(tb)
            tb = tb.tb_next
        for a, b in zip(frames, frames[1:] + [None]):
            a.tb_next = b
        tb = frames[0] if frames else None
        BaseException.__dict__["__traceback__"].__set__(err, tb)
    except BaseException:  # noqa: B036
        tb = None
    text = _safe(lambda: "".join(traceback.format_exception(cls, err, tb)), "%s: %s\n" % (ename, evalue))
    return {"ename": ename, "evalue": evalue, "traceback": text}
