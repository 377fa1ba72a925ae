"""The bash session: one long-lived bash process driven through pipes.

Each call's code is written to a file and sourced by the shell (`. cell.sh`), so everything the
shell itself holds persists: working directory, variables (exported or not), functions, aliases,
shell options. After the code, the shell prints an end marker carrying `$?` on stdout and a
marker on stderr (output.py), which is how the kernel knows the call finished and its exit code.

The shell runs as `bash -i` without a terminal, because only an interactive shell abandons the
whole running command line on SIGINT (a script shell would carry on with the next loop
iteration). Its prompts are emptied and history expansion is off, so `!` in code is literal.

Timeout: SIGINT to the shell's process group (the shell drops the command line, the foreground
command gets SIGINT; background jobs ignore SIGINT in a shell without job control), then the
kernel asks for a fresh marker. If the shell does not answer within 0.5 s, the processes started
by the call are SIGKILLed; if it still does not answer within the grace period, the shell itself
is killed and a new one started (state reset, said in stderr). The kernel itself never gets lost.

If the code ends the shell (`exit 3`, `set -e` and a failing command), the call reports the
shell's exit code, a note in stderr, and a new shell is started.
"""
import os
import signal
import subprocess
import time

from . import procs
from .output import CallOutput, Pump, new_token
from .watchdog import INTERRUPT_GRACE_S

SIGINT_GRACE_S = 0.5
START_TIMEOUT_S = 10.0
RESTART_NOTE = "\n[codemode] The shell %s, so a new shell was started: working directory, variables and functions were reset.\n"


# The shell's own stdout and stderr pipes, kept on these fds at start: the markers go there, so
# that code redirecting its stdout or stderr for the rest of the session (exec >/dev/null,
# exec 2>&1) does not take the markers with it. High numbers, away from the low ones scripts pick
# (exec 9>lock, 200 for flock) and from 255, bash's own.
MARKER_FDS = (250, 251)


def _printf_markers(token):
    # `builtin`: the code may have defined a function called printf.
    return ("builtin printf '__CODEMODE_END_%s_%%d__' \"$?\" >&%d; builtin printf '__CODEMODE_END_%s___' >&%d\n"
            % (token, MARKER_FDS[0], token, MARKER_FDS[1])).encode("ascii")


class BashSession:
    language = "bash"

    def __init__(self, scratch_dir):
        # A handled (not ignored) SIGINT is reset to the default in children: the shell and its
        # commands must be interruptible even if the kernel was started with SIGINT ignored.
        signal.signal(signal.SIGINT, lambda signum, frame: None)
        self._cell = os.path.join(scratch_dir, "cell.sh")
        self._stdin = os.path.join(scratch_dir, "stdin")
        self._proc = None
        self._start()

    def _start(self):
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        cmd_r, self._cmd_w = os.pipe()
        env = dict(os.environ, PS1="", PS2="", PS4="+ ")
        env.pop("PROMPT_COMMAND", None)
        self._proc = subprocess.Popen(
            ["bash", "--noprofile", "--norc", "--noediting", "-i"],
            stdin=cmd_r, stdout=out_w, stderr=err_w, env=env,
            # Own session and process group: no controlling terminal (so no job control) and one
            # group to signal on timeout.
            start_new_session=True,
        )
        for fd in (out_w, err_w, cmd_r):
            os.close(fd)
        self._pump = Pump({"stdout": out_r, "stderr": err_r})
        self._pump.start()
        token = new_token()
        self._pump.expect(token)
        # The startup noise ("no job control in this shell", the first prompt) is dropped.
        self._send(b"set +H +o history; unset HISTFILE PROMPT_COMMAND; PS1=''; PS2=''; PS0=''; exec %d>&1 %d>&2\n" % MARKER_FDS
                   + _printf_markers(token))
        if self._pump.wait(token, START_TIMEOUT_S, self._alive) is None:
            raise RuntimeError("bash did not start")

    def _alive(self):
        return self._proc.poll() is None

    def _send(self, line):
        try:
            os.write(self._cmd_w, line)
        except OSError:
            pass  # the shell is gone; the caller notices through _alive()

    def warm_up(self):
        """Nothing put off at start-up (python_session.py has)."""

    def after_reply(self):
        """Nothing left after a call's result (python_session.py has)."""

    def reset(self):
        self._stop()
        self._start()

    def _stop(self):
        try:
            os.killpg(self._proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self._proc.wait()
        os.close(self._cmd_w)

    def execute(self, req, send):
        started = time.monotonic()
        call = CallOutput(req["id"], req["capChars"], send)
        since = procs.now_ticks()
        # errors="surrogatepass": a lone surrogate (JSON allows "\ud800") is written as the bytes
        # it names, for bash to take as they are, rather than failing the call as a KernelError.
        with open(self._cell, "w", encoding="utf-8", errors="surrogatepass") as f:
            f.write(req["code"])
        stdin = "/dev/null"
        if req.get("stdin"):
            with open(self._stdin, "w", encoding="utf-8", errors="surrogatepass") as f:
                f.write(req["stdin"])
            stdin = self._stdin
        token = new_token()
        self._pump.attach(call)
        self._pump.expect(token)
        self._send((". %s < %s\n" % (_quote(self._cell), _quote(stdin))).encode("utf-8") + _printf_markers(token))
        codes = self._pump.wait(token, req["timeoutMs"] / 1000.0, self._alive)
        outcome = {"status": "ok"}
        if codes is None and self._pump.eof:
            # The pipes closed: the shell is exiting, but may not be reapable yet (poll() would
            # still call it alive, and the exit would be reported as a timeout).
            try:
                self._proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                pass
        if codes is not None:
            outcome["exitCode"] = int(codes["stdout"] or 0)
        elif not self._alive():
            outcome["exitCode"] = self._proc.returncode
            self._replace_shell(call, "exited with code %d" % self._proc.returncode)
        else:
            outcome["status"] = "timeout"
            outcome["error"] = {"ename": "Timeout", "evalue": "the command ran past its timeout and was interrupted", "traceback": ""}
            if not self._interrupt(since):
                self._replace_shell(call, "did not respond after the interrupt")
        self._pump.detach()
        call.finish()
        return dict(durationMs=int((time.monotonic() - started) * 1000), **call.result_fields(), **outcome)

    def _interrupt(self, since):
        """Interrupts the running command line; True when the shell is back and answering."""
        try:
            os.killpg(self._proc.pid, signal.SIGINT)
        except ProcessLookupError:
            return False
        token = new_token()
        self._pump.expect(token)
        self._send(_printf_markers(token))
        if self._pump.wait(token, SIGINT_GRACE_S, self._alive) is not None:
            return True
        procs.kill_started_since(self._proc.pid, since)
        return self._pump.wait(token, INTERRUPT_GRACE_S, self._alive) is not None

    def _replace_shell(self, call, why):
        if self._alive():
            self._stop()
        else:
            self._proc.wait()
            os.close(self._cmd_w)
            # Its last output may still be in the pipes; background jobs may keep them open.
            self._pump.wait_eof(0.1)
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)  # its background jobs
            except ProcessLookupError:
                pass
        self._pump.detach()
        call.feed("stderr", (RESTART_NOTE % why).encode("utf-8"))
        self._start()


def _quote(path):
    return "'" + path.replace("'", "'\\''") + "'"
