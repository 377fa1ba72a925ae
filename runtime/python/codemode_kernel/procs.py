"""Finding and killing the processes a call started, from /proc (Linux only, no procps needed).

"Started by this call" = a descendant of the kernel (or of the shell) whose start time is not
before the call's start. Start times are clock ticks since boot (/proc/<pid>/stat field 22),
compared with CLOCK_BOOTTIME at the call's start, so no per-call snapshot of /proc is needed: the
scan (a few ms on a busy host, far less in a pod) only happens when a call times out. A process
started in the same 10 ms tick just before the call counts as the call's.

In a sandbox pod the kernel is a root of the pod's PID namespace (its parent, the container
runtime, is outside it: ppid 0), and so are the relays and other exec'd processes. A process whose
parent died is reparented to PID 1 (the pause process), out of the kernel's tree, e.g. everything
a `setsid` escapee or a fork bomb leaves behind. There, such orphans started since the call are the
call's too. Outside a pod (the unit tests run the kernel on the developer's machine) orphans are
never touched: PID 1 is the machine's init and they belong to anyone.
"""
import os
import signal
import time

_HZ = os.sysconf("SC_CLK_TCK")


def now_ticks():
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * _HZ)


def in_pod_root():
    """True when this process's parent is outside its PID namespace (the kernel in a sandbox pod)."""
    return os.getppid() == 0


def _table():
    """{pid: (ppid, start ticks, state)} for every process we can see."""
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
        table[int(name)] = (int(fields[1]), int(fields[19]), fields[0])
    return table


def descendants_since(root, since_ticks, table=None, live_only=False):
    """Descendants of `root` started at or after `since_ticks`, parents before children; in a
    pod also the orphans (and their descendants) started since then. `live_only`: no zombies."""
    table = _table() if table is None else table
    if live_only:
        return [pid for pid in descendants_since(root, since_ticks, table) if table[pid][2] != b"Z"]
    children = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    tops = [root]
    if in_pod_root():
        tops += [pid for pid in children.get(1, []) if pid != root and table[pid][1] >= since_ticks]
    found, queue = list(tops[1:]), list(tops)
    while queue:
        for child in children.get(queue.pop(0), []):
            queue.append(child)
            if table[child][1] >= since_ticks:
                found.append(child)
    return found


SWEEP_PASSES = 300


def kill_started_since(root, since_ticks, sig=signal.SIGKILL):
    """Signals the processes the call started; returns their pids. With SIGKILL they are first
    stopped, pass after pass until none of them runs, then killed: a stopped process neither
    forks nor competes for the CPU, where killing a live fork bomb one by one may never catch up
    (the kernel gets a hundredth of the container's CPU quota)."""
    if sig != signal.SIGKILL:
        pids = descendants_since(root, since_ticks, live_only=True)
        _signal_all(pids, sig)
        return pids
    seen = set()
    for _ in range(SWEEP_PASSES):
        table = _table()
        live = descendants_since(root, since_ticks, table, live_only=True)
        seen.update(live)
        running = [pid for pid in live if table[pid][2] != b"T"]
        if not running:
            break
        _signal_all(running, signal.SIGSTOP)
    for _ in range(SWEEP_PASSES):
        live = descendants_since(root, since_ticks, live_only=True)
        if not live:
            break
        seen.update(live)
        _signal_all(live, signal.SIGKILL)
    return sorted(seen)


def _signal_all(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


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
