"""The sandbox's bounds as seen from inside the pod: did a call meet one?

- Process cap: the kubelet's podPidsLimit sets pids.max of the pod's cgroup. A fork it refuses
  increments the "max" counter in pids.events of the container's own cgroup, which the container
  can read (cgroup v1: /sys/fs/cgroup/pids/, v2: /sys/fs/cgroup/).
- Memory: the memory cgroup's oom_kill counter.
- /tmp: a memory-backed emptyDir, i.e. a tmpfs with a hard size: a write past it fails with
  ENOSPC at once, and statvfs shows it full.
- /workspace: on the node's disk by default, where the kubelet enforces sizeLimit only by evicting
  the pod later. Its usage is measured against CODEMODE_WORKSPACE_LIMIT_BYTES (pod env), each entry
  counted as at least WORKSPACE_MIN_ENTRY_BYTES: empty files take no blocks, and without that a
  loop creating them would use up the node's inodes, which nothing else bounds per pod. With
  workspaceMedium Memory it is a tmpfs like /tmp (and that env is 0): full as /tmp is.

Counters that cannot be read count as 0: outside a pod nothing is reported.
"""
import os

from . import procs

TMP_FULL_BYTES = 256 * 1024
WORKSPACE = "/workspace"
TMP = "/tmp"
# What each file, directory or link in /workspace counts at least (one block of the node's disk):
# a /workspace of limit bytes holds at most limit // WORKSPACE_MIN_ENTRY_BYTES entries, which also
# bounds a walk's cost. src/sandbox/pod.ts and the runner (src/exec/runner.ts) use the same figure.
WORKSPACE_MIN_ENTRY_BYTES = 4096


# Each counter file, found once (v1 or v2 path) and kept open: a call reads it with one pread
# (~1 µs; opening it each time cost ~13 µs, four times a call). -1: no path could be opened.
_COUNTER_FDS = {}


def _counter_fd(paths):
    fd = _COUNTER_FDS.get(paths)
    if fd is None:
        fd = -1
        for path in paths:
            try:
                fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
                break
            except OSError:
                continue
        _COUNTER_FDS[paths] = fd
    return fd


def _counter(paths, key):
    fd = _counter_fd(paths)
    if fd < 0:
        return 0
    try:
        data = os.pread(fd, 4096, 0)
    except OSError:
        return 0
    for line in data.split(b"\n"):
        parts = line.split()
        if len(parts) == 2 and parts[0] == key:
            try:
                return int(parts[1])
            except ValueError:
                return 0
    return 0


def oom_kills():
    """The memory cgroup's OOM-kill count (v1 or v2), 0 when unreadable."""
    return _counter(("/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events"), b"oom_kill")


def fork_failures():
    """How many forks the pids cgroup refused (v1 or v2), 0 when unreadable."""
    return _counter(("/sys/fs/cgroup/pids/pids.events", "/sys/fs/cgroup/pids.events"), b"max")


def volume_full(path):
    """True when `path`'s filesystem has (nearly) no room left: one statvfs."""
    try:
        st = os.statvfs(path)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < TMP_FULL_BYTES


def tmp_full():
    return volume_full(TMP)


def workspace_limit():
    """/workspace's size limit in bytes from the pod's env, or 0 (no limit known)."""
    try:
        return max(0, int(os.environ.get("CODEMODE_WORKSPACE_LIMIT_BYTES", "0")))
    except ValueError:
        return 0


def workspace_over(limit):
    """True once /workspace holds more than `limit` bytes (allocated blocks, like du) or more
    entries than `limit` // WORKSPACE_MIN_ENTRY_BYTES."""
    if limit <= 0:
        return False
    max_entries = limit // WORKSPACE_MIN_ENTRY_BYTES
    total, seen, stack = 0, 0, [WORKSPACE]
    while stack:
        try:
            it = os.scandir(stack.pop())
        except OSError:
            continue
        with it:
            for entry in it:
                seen += 1
                if seen > max_entries:
                    return True
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    else:
                        total += entry.stat(follow_symlinks=False).st_blocks * 512
                except OSError:
                    continue
                if total > limit:
                    return True
    return False


class Watch:
    """Counters at the start of a call; `report()` says which bounds the call met since."""

    def __init__(self):
        self._oom = oom_kills()
        self._forks = fork_failures()
        self.disk_full = None  # set by whoever stopped the program for its disk use

    def workspace_guard(self):
        """A check for a run's pump: True (and the watch says why) once /workspace is over its limit."""
        limit = workspace_limit()

        def over():
            if limit and workspace_over(limit):
                self.disk_full = "workspace"
                return True
            return False
        return over

    def report(self, scan_workspace=True):
        full = self.disk_full
        if full is None and scan_workspace and workspace_over(workspace_limit()):
            full = "workspace"
        if full is None and volume_full(WORKSPACE):
            full = "workspace"
        if full is None and tmp_full():
            full = "tmp"
        fields = dict(oomKilled=oom_kills() > self._oom, processLimit=fork_failures() > self._forks)
        if full is not None:
            fields["diskFull"] = full
        return fields


def bounded(call, *args):
    """Runs a session call and adds the bounds it met to its result (`exec`). /workspace is not
    walked here: on disk a write past its limit does not fail, so it never explains a failed
    call, and a walk would cost every call time; the kubelet's eviction enforces it (the gateway
    then reports Evicted). A tmpfs /workspace (workspaceMedium Memory) that is full is seen with
    one statvfs, as /tmp is."""
    watch = Watch()
    since = procs.now_ticks()
    result = call(*args)
    if isinstance(result, dict):
        result.update(watch.report(scan_workspace=False))
        if result.get("processLimit"):
            # Background processes normally outlive a session call; a fork bomb's must not hold
            # the session's process cap (and a CPU) for the rest of its life.
            procs.kill_started_since(os.getpid(), since)
    return result
