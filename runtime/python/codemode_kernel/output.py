"""Output of a call: capped capture, coalesced streaming frames, and the pump that reads the pipes.

Output is captured at the file-descriptor level (the kernel's fds 1/2 in Python mode, the shell's
pipes in bash mode), so child processes are captured too. A pump thread reads the pipes for the
kernel's whole life and routes bytes to the running call, or drops them between calls (late
output of background processes never leaks into the next call's result).

End-of-call sync: the writer (the kernel after user code, or the shell after the command) writes
an end marker `__CODEMODE_END_<16 hex token>_<exit code or empty>__` to each stream. Pipes keep
order, so once the pump has seen the marker on a stream, everything written before it is in.
"""
import codecs
import os
import random
import re
import select
import threading
import time

FLUSH_INTERVAL_S = 0.02
FLUSH_BYTES = 16 * 1024
MARKER_PREFIX = b"__CODEMODE_END_"
MARKER_RE = re.compile(rb"__CODEMODE_END_([0-9a-f]{16})_(\d*)__")
MARKER_MAX = len(MARKER_PREFIX) + 16 + 1 + 12 + 2


_rng = random.Random()  # private: user code seeding `random` must not repeat our tokens


def new_token():
    # Not a secret, just unlikely in real output (os.urandom costs ~0.1 ms on some VMs).
    return "%016x" % _rng.getrandbits(64)


def marker(token, code=""):
    return b"__CODEMODE_END_%s_%s__" % (token.encode("ascii"), str(code).encode("ascii"))


class StreamCapture:
    """One stream of one call: keeps the first `cap` characters, counts every byte."""

    def __init__(self, cap):
        self.cap = max(0, cap)
        self.bytes = 0
        self.truncated = False
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._kept = []
        self._kept_chars = 0
        self._pending = []
        self.pending_chars = 0

    def feed(self, data):
        self.bytes += len(data)
        if not self.truncated:
            # A character is at most 4 bytes: decoding more than this can never be kept.
            room = self.cap - self._kept_chars
            self._keep(self._decoder.decode(data[:4 * room + 4]))

    def finish(self):
        if not self.truncated:
            self._keep(self._decoder.decode(b"", True))

    def _keep(self, text):
        room = self.cap - self._kept_chars
        if len(text) > room:
            text = text[:room]
            self.truncated = True
        if text:
            self._kept.append(text)
            self._kept_chars += len(text)
            self._pending.append(text)
            self.pending_chars += len(text)

    def take_pending(self):
        text = "".join(self._pending)
        self._pending = []
        self.pending_chars = 0
        return text

    @property
    def text(self):
        return "".join(self._kept)


class CallOutput:
    """Both streams of one call, plus the `output` frames streamed while it runs.

    Frames carry exactly the kept text (so the stream is capped like the result) and are
    coalesced: sent at most every FLUSH_INTERVAL_S, or once FLUSH_BYTES are pending.
    """

    def __init__(self, call_id, cap, send):
        self.call_id = call_id
        self.streams = {"stdout": StreamCapture(cap), "stderr": StreamCapture(cap)}
        self._send = send
        self._last_flush = time.monotonic()

    def feed(self, stream, data):
        self.streams[stream].feed(data)
        if sum(s.pending_chars for s in self.streams.values()) >= FLUSH_BYTES:
            self.flush()

    def tick(self):
        """Flushes when output is pending and the interval passed; returns seconds until the next tick."""
        if not any(s.pending_chars for s in self.streams.values()):
            return None
        wait = self._last_flush + FLUSH_INTERVAL_S - time.monotonic()
        if wait <= 0:
            self.flush()
            return None
        return wait

    def flush(self, last=False):
        self._last_flush = time.monotonic()
        for name, stream in self.streams.items():
            text = stream.take_pending()
            if text:
                frame = {"id": self.call_id, "type": "output", "stream": name, "text": text}
                if last:
                    # The call's result follows at once: it carries these frames (Connection.send).
                    self._send(frame, hold=True)
                else:
                    self._send(frame)

    def finish(self):
        """The call ended: the last output frames go out with its result (the next send)."""
        for stream in self.streams.values():
            stream.finish()
        self.flush(last=True)

    def result_fields(self):
        out, err = self.streams["stdout"], self.streams["stderr"]
        return {
            "stdout": out.text,
            "stderr": err.text,
            "stdoutBytes": out.bytes,
            "stderrBytes": err.bytes,
            "truncated": out.truncated or err.truncated,
        }


class MarkerScanner:
    """Splits one stream's bytes into output and end markers; holds back a possibly split marker."""

    def __init__(self):
        self._buf = b""

    def feed(self, data):
        """Yields ("data", bytes) and ("marker", token, code) items in stream order."""
        buf = self._buf + data
        while True:
            m = MARKER_RE.search(buf)
            if not m:
                break
            if m.start():
                yield ("data", buf[:m.start()])
            yield ("marker", m.group(1).decode("ascii"), m.group(2).decode("ascii"))
            buf = buf[m.end():]
        cut = self._partial_marker_at(buf)
        if cut:
            yield ("data", buf[:cut])
        self._buf = buf[cut:]

    @staticmethod
    def _partial_marker_at(buf):
        start = buf.rfind(MARKER_PREFIX)
        if start >= 0 and len(buf) - start < MARKER_MAX:
            return start
        for n in range(min(len(MARKER_PREFIX) - 1, len(buf)), 0, -1):
            if buf.endswith(MARKER_PREFIX[:n]):
                return len(buf) - n
        return len(buf)


class Pump(threading.Thread):
    """Reads the given pipes ({"stdout": fd, "stderr": fd}) until EOF and routes them to the call."""

    def __init__(self, fds):
        super().__init__(name="codemode-pump", daemon=True)
        self._fds = dict(fds)
        self._names = {fd: name for name, fd in fds.items()}
        for fd in self._names:
            os.set_blocking(fd, False)  # drain() may read them too
        self._scanners = {name: MarkerScanner() for name in fds}
        self.cond = threading.Condition()
        self._call = None
        self._awaited = None
        self._seen = {}
        self._start = None
        self._begun = set()
        self.eof = set()

    def attach(self, call, start=None):
        """Output goes to `call` from now on; with `start`, on each stream only what follows that
        token's marker (the writer writes it after attaching: what was written before, by a
        thread of an earlier call say, may still be in the pipe, and is not this call's)."""
        with self.cond:
            self._call = call
            self._awaited = None
            self._seen = {}
            self._start = start
            self._begun = set()

    def detach(self):
        with self.cond:
            self._call = None

    def expect(self, token):
        """From now on, output on a stream ends for the call once `token`'s marker appeared on it."""
        with self.cond:
            self._awaited = token
            self._seen = {}

    def wait(self, token, timeout, alive=None):
        """{stream: code} once `token`'s marker was seen on every stream; None on timeout, on EOF,
        or when `alive()` (polled every 50 ms) turns false."""
        end = time.monotonic() + timeout
        with self.cond:
            while True:
                if self._awaited == token and len(self._seen) == len(self._fds):
                    return dict(self._seen)
                left = end - time.monotonic()
                if left <= 0 or self.eof or (alive is not None and not alive()):
                    return None
                self.cond.wait(min(left, 0.05) if alive else left)

    def drain(self, token, timeout):
        """Like wait(), for markers the caller has just written itself: reads them in this
        thread, which saves two thread switches per call; falls back to wait()."""
        with self.cond:
            for name, fd in self._fds.items():
                while name not in self._seen:
                    try:
                        data = os.read(fd, 1 << 16)
                    except BlockingIOError:
                        break
                    if not data:
                        break
                    self._route(name, data)
        return self.wait(token, timeout)

    def wait_eof(self, timeout):
        end = time.monotonic() + timeout
        with self.cond:
            while len(self.eof) < len(self._fds) and time.monotonic() < end:
                self.cond.wait(end - time.monotonic())

    def run(self):
        open_fds = list(self._names)
        timeout = None
        while open_fds:
            readable = select.select(open_fds, [], [], timeout)[0]
            with self.cond:
                for fd in readable:
                    try:
                        data = os.read(fd, 1 << 16)
                    except BlockingIOError:
                        continue  # drain() got there first
                    if not data:
                        # The pump owns its read ends: nothing else closes them, so no fd reuse race.
                        os.close(fd)
                        open_fds.remove(fd)
                        self.eof.add(self._names[fd])
                        self.cond.notify_all()
                    else:
                        self._route(self._names[fd], data)
                timeout = self._call.tick() if self._call else None

    def _route(self, name, data):
        for item in self._scanners[name].feed(data):
            if item[0] == "marker":
                # Markers of other tokens (an interrupted call's late marker) are dropped too.
                if item[1] == self._awaited:
                    self._seen[name] = item[2]
                    self.cond.notify_all()
                elif item[1] == self._start:
                    self._begun.add(name)
            elif self._call and name not in self._seen and (self._start is None or name in self._begun):
                self._call.feed(name, item[1])
