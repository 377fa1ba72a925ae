#!/usr/bin/env python3
"""Relay between an exec stream and the kernel's socket (runtime/README.md).

    python3 relay.py /tmp/.codemode/kernel.sock

Hands its stdin and stdout (the exec stream) to the kernel over the socket (SCM_RIGHTS), so
frames go between the gateway and the kernel without passing through this process (one hop
less each way), then waits until the kernel closes the socket: the exec stream lasts as long
as this process. Exit codes: 0 closed, 2 usage, 3 cannot connect. A pod is Ready as soon as its
container started, possibly before the kernel listens: the relay waits up to CONNECT_WAIT_S for
the socket.
"""
import array
import socket
import sys
import time

sys.dont_write_bytecode = True  # the runtime mount is read-only
from codemode_kernel.hardening import make_undumpable  # noqa: E402

CONNECT_WAIT_S = 10.0


def connect(path):
    deadline = time.monotonic() + CONNECT_WAIT_S
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
            return sock
        except (FileNotFoundError, ConnectionRefusedError):
            sock.close()
            if time.monotonic() >= deadline:
                raise
            # A cold run waits for this: poll finely. A connect attempt costs microseconds; every 5 ms
            # cost a cold run ~2.5 ms on average (docs/performance.md, 2026-12-03 18:20-19:00).
            time.sleep(0.001)


def main(path):
    # The relay's stdout is the stream the gateway reads: no user program of the same uid may
    # open it through /proc/<pid>/fd (codemode_kernel/hardening.py).
    make_undumpable()
    try:
        sock = connect(path)
    except OSError as err:
        sys.stderr.write("relay: cannot connect to the kernel at %s: %s\n" % (path, err))
        return 3
    # ATTACH in codemode_kernel/server.py.
    sock.sendmsg([b"A"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [sys.stdin.fileno(), sys.stdout.fileno()]))])
    while sock.recv(4096):  # the kernel never writes here: it closes the socket when the stream ends
        pass
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.stderr.write("usage: relay.py SOCKET_PATH\n")
        sys.exit(2)
    try:
        sys.exit(main(sys.argv[1]))
    except (BrokenPipeError, ConnectionResetError):
        sys.exit(0)
