"""Framing (runtime/PROTOCOL.md): a header line `<byte length>\\n`, then that many bytes of UTF-8 JSON."""
import json

# The largest request the gateway sends: code and stdin of at most 256 KiB each, every byte
# JSON-escaped to at most 6 (\u00XX), plus the other fields: 3 MiB, rounded up.
MAX_FRAME_BYTES = 4 * 1024 * 1024
MAX_HEADER_BYTES = 20


class ProtocolError(Exception):
    """The peer sent something that is not a frame; the connection cannot be resynchronised."""


def encode(message):
    try:
        body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (e.g. in an exception message) cannot be UTF-8; \\u escapes always can.
        body = json.dumps(message, separators=(",", ":")).encode("ascii")
    return b"%d\n%s" % (len(body), body)


class FrameReader:
    """Reads whole frames from a blocking socket, or from `read(n)` (e.g. a pipe's os.read)."""

    def __init__(self, sock, max_bytes=MAX_FRAME_BYTES, read=None, initial=b""):
        self._read = read or sock.recv
        self._max = max_bytes
        self._buf = bytearray(initial)

    def read(self):
        """The next message, or None when the peer closed the connection."""
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                header = bytes(self._buf[:nl])
                if not header.isdigit() or nl > MAX_HEADER_BYTES:
                    raise ProtocolError("malformed frame header %r" % header[:32])
                size = int(header)
                if size > self._max:
                    raise ProtocolError("frame of %d bytes exceeds %d" % (size, self._max))
                end = nl + 1 + size
                if len(self._buf) >= end:
                    body = bytes(self._buf[nl + 1:end])
                    del self._buf[:end]
                    try:
                        return json.loads(body.decode("utf-8"))
                    except ValueError as err:
                        raise ProtocolError("frame is not UTF-8 JSON: %s" % err) from err
            elif len(self._buf) > MAX_HEADER_BYTES:
                raise ProtocolError("malformed frame header %r" % bytes(self._buf[:32]))
            chunk = self._read(1 << 16)
            if not chunk:
                return None
            self._buf += chunk
