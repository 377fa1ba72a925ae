"""Keeps user programs of the same uid out of the kernel's and the relay's descriptors.

A warm pool pod's `run` starts the user's program as a child of the kernel, with the kernel's
uid. Without this, that program could open /proc/<kernel or relay pid>/fd/N and write into the
stream the gateway reads, or ptrace either process. A non-dumpable process's /proc entries
belong to root and ptrace needs CAP_SYS_PTRACE, which sandbox pods never have. Children reset
the flag when they exec, so user programs stay ordinary (debuggable, core-dumpable) processes.
"""
import ctypes
import ctypes.util

PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3


def make_undumpable():
    """True once the process is non-dumpable; False where prctl is unavailable (not Linux, no libc)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            return False
        return libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
