"""One-shot runs (op "run"): the code runs as a fresh program, as it would in a cold sandbox pod.

A warm pool pod serves exactly one transient run and is then deleted. Its kernel does what the
runner script does in a cold pod: starts the program in its own process group with the code in
a private file (never on a command line), feeds its stdin, streams its capped output, stops the
whole group at the deadline (TERM, then KILL after a grace), and reports the exit code, whether
it timed out and whether the memory cgroup killed something meanwhile.

A Python interpreter is started ahead of time (`prestart`), blocked reading its code from a
pipe, so a python run skips interpreter start-up (~15-30 ms).
"""
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time

from . import bounds, procs
from .output import CallOutput

KILL_GRACE_S = 1.0
POLL_S = 0.05  # how often the pump checks whether the program exited
# Once the program exited, how long output still arriving is read before the pipes are closed
# (a process that escaped the group with setsid may write forever).
DRAIN_S = 0.5
WORKSPACE_CHECK_S = 0.2  # how often /workspace is measured against its limit (overshoot ~ 0.2 s of writes)
LANGUAGES = ("python", "bash", "sh", "node")
EXIT_TIMED_OUT = 124  # what coreutils `timeout` (the cold runner) reports

# Runs in the prestarted interpreter: imports what it needs first, then blocks until the code
# arrives on fd argv[1]. The program runs in a fresh namespace as __main__; a traceback shows
# the user's code (from linecache), not this bootstrap.
#
# At the end it does what interpreter exit does that a program can observe — waits for non-daemon
# threads, runs atexit handlers, flushes stdout and stderr, maps SystemExit to the exit code — and
# then leaves with os._exit: full interpreter finalization costs ~15 ms, most of a warm run. Not
# done: flushing files the program left open (the single-use pod and its files are deleted after
# the run) and finalizers run only by teardown.
BOOTSTRAP = r"""
import atexit, linecache, os, sys, threading, traceback
def _codemode_preimport(names):
    # The profile's modules, imported before the code arrives; what they print is not the run's.
    if not names:
        return
    import importlib
    saved = os.dup(1), os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    try:
        for name in names.split(","):
            try:
                importlib.import_module(name)
            except BaseException:
                pass
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (null,) + saved:
            os.close(f)
def _codemode_run():
    _codemode_preimport(sys.argv[3] if len(sys.argv) > 3 else "")
    fd = int(sys.argv[1])
    chunks = []
    while True:
        b = os.read(fd, 1 << 16)
        if not b:
            break
        chunks.append(b)
    os.close(fd)
    src = b"".join(chunks).decode("utf-8", "surrogateescape")
    path = sys.argv[2]
    sys.argv = [path]
    linecache.cache[path] = (len(src), None, src.splitlines(True), path)
    g = {"__name__": "__main__", "__file__": path, "__builtins__": __builtins__}
    try:
        exec(compile(src, path, "exec"), g)
    except SystemExit as e:
        return _codemode_status(e.code)
    except BaseException as e:
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == "<string>":
            tb = tb.tb_next
        traceback.print_exception(type(e), e, tb)
        return 130 if isinstance(e, KeyboardInterrupt) else 1
    return 0
def _codemode_status(code):
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except Exception:
        pass
    return 1
def _codemode_exit(status):
    try:
        threading._shutdown()
    except BaseException:
        pass
    try:
        atexit._run_exitfuncs()
    except SystemExit as e:
        status = _codemode_status(e.code)
    except BaseException:
        pass
    for f in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            f.flush()
        except Exception:
            pass
    os._exit(status)
_codemode_exit(_codemode_run())
"""

PROGRAM_PATH = "/workspace/main.py"


def workdir():
    return "/workspace" if os.path.isdir("/workspace") and os.access("/workspace", os.W_OK) else tempfile.gettempdir()


def check_run(msg):
    """Raises ValueError when a run request names no language this kernel can start."""
    if msg.get("language") not in LANGUAGES:
        raise ValueError('"language" must be one of %s' % ", ".join(LANGUAGES))


class Prestarted:
    """A python3 interpreter waiting for its code on a pipe."""

    def __init__(self, preimport=()):
        code_r, self._code_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-u", "-c", BOOTSTRAP, str(code_r), PROGRAM_PATH, ",".join(preimport)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                pass_fds=(code_r,), cwd=workdir(), start_new_session=True,
            )
        finally:
            os.close(code_r)

    def send_code(self, code):
        # What fits the pipe's buffer (64 KiB; most programs) is written here and now: the
        # interpreter starts on it without waiting for a thread to be scheduled (~0.5-1 ms of a
        # warm run). Only a longer program's rest goes to a thread, which blocks until it is read.
        fd = self._code_w
        rest = memoryview(code)
        try:
            os.set_blocking(fd, False)
            while rest:
                rest = rest[os.write(fd, rest):]
        except BlockingIOError:
            pass
        except OSError:
            rest = memoryview(b"")  # the interpreter is gone: its run reports what happened
        if not rest:
            os.close(fd)
            return
        os.set_blocking(fd, True)

        def write():
            try:
                _write_all(fd, rest)
            except OSError:
                pass
            finally:
                os.close(fd)
        try:
            _background(write)
        except RuntimeError:
            write()  # no thread to be had: the interpreter is reading, so this returns once it has the code

    def discard(self):
        _killpg(self.proc, signal.SIGKILL)
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            f.close()
        try:
            os.close(self._code_w)
        except OSError:
            pass


class OneShot:
    """Runs `run` requests; owns the prestarted interpreter, if any."""

    def __init__(self, prestart, preimport=()):
        self._ready = None
        if prestart:
            try:
                self._ready = Prestarted(preimport)
            except OSError:
                self._ready = None  # no python3 to prestart: runs start one on demand

    def discard(self):
        """The pod became a session's: the prestarted interpreter will never be used."""
        if self._ready is not None:
            self._ready.discard()
            self._ready = None

    def run(self, req, send):
        started = time.monotonic()
        call = CallOutput(req["id"], req["capChars"], send)
        code = _encode(req["code"])
        since = procs.now_ticks()
        watch = bounds.Watch()
        scratch = None
        stdin = _encode(req.get("stdin") or "")
        if req["language"] == "python" and self._ready is not None:
            pre, self._ready = self._ready, None
            proc = pre.proc
            # stdin's feeder exists before the program has its code: a program that fills the
            # pod's process limit at once (a fork bomb) leaves no thread to start after it.
            _start_feed(proc.stdin, stdin)
            pre.send_code(code)
        else:
            scratch = tempfile.mkdtemp(prefix=".codemode.")
            path = os.path.join(scratch, "main." + {"python": "py", "node": "js"}.get(req["language"], "sh"))
            with open(path, "wb") as f:
                f.write(code)
            argv = {"python": [sys.executable, "-u"], "node": ["node"], "bash": ["bash"], "sh": ["sh"]}[req["language"]]
            try:
                proc = subprocess.Popen(argv + [path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=workdir(), start_new_session=True)
            except OSError as err:
                _rmtree(scratch)
                return dict(status="ok", exitCode=127, timedOut=False, oomKilled=False, durationMs=_ms(started),
                            stdout="", stderr="codemode: cannot start %s: %s\n" % (argv[0], err.strerror),
                            stdoutBytes=0, stderrBytes=0, truncated=False)
            _start_feed(proc.stdin, stdin)
        left = []

        def on_exit():  # what the program left running when it ended (killed right after)
            left.extend(procs.descendants_since(os.getpid(), since, live_only=True))
        timed_out = _pump(proc, call, started + req["timeoutMs"] / 1000.0, watch.workspace_guard(), on_exit)
        rc = proc.wait()
        _killpg(proc, signal.SIGKILL)  # whatever the program left running goes with it
        # ... and what escaped its group (setsid, orphans of a fork bomb), before anything forks.
        procs.kill_started_since(os.getpid(), since)
        call.finish()
        if scratch:
            _rmtree(scratch)
        exit_code = EXIT_TIMED_OUT if timed_out else (rc if rc >= 0 else 128 - rc)
        result = dict(status="timeout" if timed_out else "ok", exitCode=exit_code, timedOut=timed_out, durationMs=_ms(started),
                      leftovers=0 if timed_out else len(left))
        result.update(watch.report())
        result.update(call.result_fields())
        return result


def _encode(text):
    """A request's text as bytes: surrogate escapes as the bytes they stand for, any other lone
    surrogate (JSON allows "\\ud800") as the bytes it names, for the program to reject if it
    must, rather than failing the run as a KernelError."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def _pump(proc, call, deadline, over_disk=lambda: False, on_exit=lambda: None):
    """Reads both pipes until they close; stops the group at the deadline. True if it had to.

    Once the program exits, whatever it left running in its group is killed (the pod is
    single-use), so a background child holding the pipes cannot keep the run open. A process
    that left the group (setsid) and holds a pipe is given up on DRAIN_S after the program
    exited, even if it keeps writing. `over_disk` runs every WORKSPACE_CHECK_S; when it says the
    program's disk use is over its limit, the group is killed at once.
    """
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
    sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
    open_streams = 2
    timed_out = False
    kill_at = None
    group_killed = False
    exited_at = None
    next_disk_check = time.monotonic() + WORKSPACE_CHECK_S
    # Until the program exits too: one that closed its stdout and stderr still has its deadline.
    while open_streams or exited_at is None:
        now = time.monotonic()
        if not timed_out and not group_killed and now >= deadline:
            timed_out = True
            _killpg(proc, signal.SIGTERM)
            kill_at = now + KILL_GRACE_S
        if kill_at is not None and now >= kill_at:
            _killpg(proc, signal.SIGKILL)
            kill_at, group_killed = None, True
        if not group_killed and now >= next_disk_check:
            next_disk_check = now + WORKSPACE_CHECK_S
            if over_disk():
                _killpg(proc, signal.SIGKILL)
                kill_at, group_killed = None, True
        waits = [POLL_S]
        tick = call.tick()
        if tick is not None:
            waits.append(tick)
        if kill_at is not None:
            waits.append(kill_at - now)
        elif not timed_out:
            waits.append(deadline - now)
        events = sel.select(max(0.0, min(waits)))
        for key, _ in events:
            data = os.read(key.fileobj.fileno(), 65536)
            if data:
                call.feed(key.data, data)
            else:
                sel.unregister(key.fileobj)
                key.fileobj.close()
                open_streams -= 1
        if proc.poll() is not None:
            if exited_at is None:
                exited_at = time.monotonic()
                if not group_killed:
                    on_exit()
            if not group_killed:
                _killpg(proc, signal.SIGKILL)
                kill_at, group_killed = None, True
            elif not events or time.monotonic() - exited_at >= DRAIN_S:
                break  # only processes outside the group still hold a pipe
    for key in list(sel.get_map().values()):
        sel.unregister(key.fileobj)
        key.fileobj.close()
    sel.close()
    return timed_out


def _killpg(proc, sig):
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _feed(pipe, data):
    try:
        if data:
            pipe.write(data)
    except (BrokenPipeError, OSError):
        pass  # the program exited without reading all of it, as `cmd < file` allows
    finally:
        try:
            pipe.close()
        except OSError:
            pass


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _background(fn):
    threading.Thread(target=fn, name="codemode-feed", daemon=True).start()


def _start_feed(pipe, data):
    """Feeds the program's stdin in the background (it may never read it), or closes it at once
    when there is nothing to feed. When no thread can be started — the program has filled the
    pod's process limit, which the run then reports — its stdin is closed instead: the run goes on
    to its outcome rather than failing in the kernel."""
    if not data:
        _feed(pipe, data)
        return
    try:
        _background(lambda: _feed(pipe, data))
    except RuntimeError:
        _feed(pipe, b"")


def _rmtree(path):
    import shutil
    shutil.rmtree(path, ignore_errors=True)


def _ms(started):
    return int(round((time.monotonic() - started) * 1000))
