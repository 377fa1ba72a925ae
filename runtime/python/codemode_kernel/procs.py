"""Finding and killing the processes a call started, from /proc (Linux only, no procps needed).

"Started by this call" = a descendant of the kernel (or of the shell) whose start time is not
before the call's start. Start times are clock ticks since boot (/proc/<pid>/stat field 22),
compared with CLOCK_BOOTTIME at the call's start, so no per-call snapshot of /proc is needed: the
scan (a few ms on a busy host, far less in a pod) only happens when a call times out. A process
started in the same 10 ms tick just before the call counts as the call's.
"""
import os
import signal
import time

_HZ = os.sysconf("SC_CLK_TCK")


def now_ticks():
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * _HZ)


def _table():
    """{pid: (ppid, start ticks)} for every process we can see."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                data = f.read()
        except OSError:
            continue  # exited meanwhile
        # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
        fields = data[data.rindex(b")") + 2:].split()
        table[int(name)] = (int(fields[1]), int(fields[19]))
    return table


def descendants_since(root, since_ticks):
    """Descendants of `root` started at or after `since_ticks`, parents before children."""
    table = _table()
    children = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, queue = [], [root]
    while queue:
        for child in children.get(queue.pop(0), []):
            queue.append(child)
            if table[child][1] >= since_ticks:
                found.append(child)
    return found


def kill_started_since(root, since_ticks, sig=signal.SIGKILL):
    """Signals the processes the call started; returns their pids."""
    pids = descendants_since(root, since_ticks)
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    return pids


def reap(pids, timeout=0.2):
    """Collects the exit status of those of `pids` that are our direct children (no zombies)."""
    end = time.monotonic() + timeout
    left = set(pids)
    while left and time.monotonic() < end:
        for pid in list(left):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid  # not our child, or already collected (e.g. by its Popen object)
            if done:
                left.discard(pid)
        if left:
            time.sleep(0.005)
