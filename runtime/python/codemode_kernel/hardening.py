"""Keeps user programs of the same uid out of the kernel's and the relay's descriptors.

A warm pool pod's `run` starts the user's program as a child of the kernel, with the kernel's
uid. Without this, that program could open /proc/<kernel or relay pid>/fd/N and write into the
stream the gateway reads, or ptrace either process. A non-dumpable process's /proc entries
belong to root and ptrace needs CAP_SYS_PTRACE, which sandbox pods never have. Children reset
the flag when they exec, so user programs stay ordinary (debuggable, core-dumpable) processes.
"""
import ctypes

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
