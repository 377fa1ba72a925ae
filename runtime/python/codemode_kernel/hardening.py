"""Keeps user programs of the same uid out of the kernel's and the relay's descriptors.

A warm pool pod's `run` starts the user's program as a child of the kernel, with the kernel's
uid. Without this, that program could open /proc/<kernel or relay pid>/fd/N and write into the
stream the gateway reads, or ptrace either process. A non-dumpable process's /proc entries
belong to root and ptrace needs CAP_SYS_PTRACE, which sandbox pods never have. Children reset
the flag when they exec, so user programs stay ordinary (debuggable, core-dumpable) processes.
"""
import ctypes
import fcntl
import os
import select
import socket
import time

PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3


def _libc():
    """The C library's symbols: the interpreter's own (dlopen of NULL: python3 links libc), else
    libc.so.6 by name. Not ctypes.util.find_library: importing it (shutil, subprocess, re) took
    ~12 ms of the relay's ~23 ms start-up, which a cold run waits for."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl  # noqa: B018 - raises AttributeError where the symbol is not there
        return libc
    except (OSError, AttributeError):
        return ctypes.CDLL("libc.so.6", use_errno=True)


def make_undumpable():
    """True once the process is non-dumpable; False where prctl is unavailable (not Linux, no libc)."""
    try:
        libc = _libc()
        if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            return False
        return libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def above_stdio(fd):
    """`fd`, or a close-on-exec copy of it numbered 3 or more (the original closed). Session code
    may close fds 0, 1 or 2, and the next call puts stdin and the capture pipes back on them: a
    descriptor of the kernel's (a relay's stream, a client's socket) must never hold one of them."""
    if fd > 2:
        return fd
    copy = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    os.close(fd)
    return copy


def accept_above_stdio(listener):
    """The next client's socket from a listener, never numbered 0, 1 or 2 (above_stdio).

    The wait is a select(), and only then accept(): Linux reserves the new socket's number (the
    lowest free one) when accept() starts, so a thread blocked in accept() would hold fd 0 if
    the code closed it, and putting /dev/null back there would fail (EBUSY) until a client came."""
    listener.setblocking(False)
    while True:
        select.select([listener], [], [])
        try:
            sock, _ = listener.accept()
        except BlockingIOError:  # the client went, or another thread took it
            continue
        except OSError:  # e.g. no descriptor left (EMFILE): the client waits in the backlog
            time.sleep(0.01)
            continue
        try:
            sock.setblocking(True)
            if sock.fileno() > 2:
                return sock
            return socket.socket(fileno=above_stdio(sock.detach()))
        except OSError:  # no descriptor to be had: as if the client had not come
            sock.close()
