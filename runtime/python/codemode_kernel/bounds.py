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
import threading
import time

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


def workspace_usage(limit, root=WORKSPACE, proc="/proc"):
    """(entries, bytes, over) of /workspace: its files, directories and links, the blocks they
    take (like du), and the files there deleted while a process of the pod still holds them open
    (du cannot see those, and a program can go on writing to them: the file limit bounds each one,
    not how many); and whether either is past `limit` (entries at WORKSPACE_MIN_ENTRY_BYTES each).
    A directory the walk cannot read or search makes it over: what it holds cannot be counted (code
    can create files in a directory it took read permission from). The sandbox's user owns every
    directory there and can give the permission back. The walk stops as soon as it is over, so it
    visits at most limit // WORKSPACE_MIN_ENTRY_BYTES + 1 entries."""
    max_entries = limit // WORKSPACE_MIN_ENTRY_BYTES
    total, seen, stack = 0, 0, [root]
    while stack:
        try:
            it = os.scandir(stack.pop())
        except PermissionError:
            return seen, total, True
        except OSError:
            continue  # gone since it was listed
        with it:
            for entry in it:
                seen += 1
                if seen > max_entries:
                    return seen, total, True
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    else:
                        total += entry.stat(follow_symlinks=False).st_blocks * 512
                except PermissionError:
                    return seen, total, True
                except OSError:
                    continue
                if total > limit:
                    return seen, total, True
    return _deleted_open(limit, max_entries, seen, total, root, proc)


def _deleted_open(limit, max_entries, seen, total, root, proc):
    """workspace_usage's count with the deleted files under `root` that processes hold open
    (/proc/<pid>/fd, as `lsof +L1` finds them; each inode once)."""
    prefix = root.rstrip("/") + "/"
    inodes = set()
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return seen, total, False
    for pid in pids:
        fds = "%s/%s/fd" % (proc, pid)
        try:
            names = os.listdir(fds)
        except OSError:
            continue  # not ours to read (the pod's pause process), or gone
        for fd in names:
            path = "%s/%s" % (fds, fd)
            try:
                if not os.readlink(path).startswith(prefix):
                    continue
                st = os.stat(path)
            except OSError:
                continue
            if st.st_nlink != 0 or (st.st_dev, st.st_ino) in inodes:
                continue
            inodes.add((st.st_dev, st.st_ino))
            seen += 1
            total += st.st_blocks * 512
            if seen > max_entries or total > limit:
                return seen, total, True
    return seen, total, False


def workspace_over(limit):
    """True once /workspace holds more than `limit` bytes (allocated blocks, like du) or more
    entries than `limit` // WORKSPACE_MIN_ENTRY_BYTES."""
    return limit > 0 and workspace_usage(limit)[2]


# The kernel's exit status when WorkspaceGuard ended it (KERNEL_WORKSPACE_OVER_EXIT_CODE in
# src/sandbox/pod-failure.ts): the gateway reads it from the pod and tells the session's user why.
WORKSPACE_OVER_EXIT_CODE = 4
# How often the guard looks (one statvfs), and how long it trusts that look before it walks anyway.
WORKSPACE_GUARD_PERIOD_S = 0.2
WORKSPACE_GUARD_WALK_AT_LEAST_S = 60.0


def _fs_used(path):
    """(inodes, bytes) in use on `path`'s filesystem (the node's disk for /workspace), or None."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_files - st.f_ffree, (st.f_blocks - st.f_bfree) * st.f_frsize


class WorkspaceGuard:
    """Ends a session whose /workspace on disk went past its limit, during a call or between calls
    (background processes): a session's calls do not walk /workspace, and Kubernetes bounds
    neither a pod's inodes nor, before the kubelet's eviction comes round, its bytes.

    Looks five times a second for what costs a statvfs: the session's /workspace can have grown by
    at most what the whole filesystem grew since the last walk, so it walks only when that could
    have put it past the limit (and at least once a minute, in case other pods freed as much as it
    took). Past the limit, it calls `on_over` (which ends the kernel). A thread of the kernel:
    code in the session can stop it, as it can the kernel; it bounds what code does by mistake or
    by the plain loop, and the kubelet's eviction and the node's stay the backstop."""

    def __init__(self, limit, on_over, period_s=WORKSPACE_GUARD_PERIOD_S, walk_at_least_s=WORKSPACE_GUARD_WALK_AT_LEAST_S, root=WORKSPACE):
        self._root = root
        self._limit = limit
        self._max_entries = limit // WORKSPACE_MIN_ENTRY_BYTES
        self._on_over = on_over
        self._period_s = period_s
        self._walk_at_least_s = walk_at_least_s
        self._started = False

    def start(self):
        """Starts watching (once; later calls do nothing)."""
        if self._started or self._limit <= 0:
            return
        self._started = True
        threading.Thread(target=self._watch, name="codemode-workspace-guard", daemon=True).start()

    def _watch(self):
        seen = None  # (entries, bytes) at the last walk
        base = None  # the filesystem's use when that walk started
        walked_at = 0.0
        while True:
            time.sleep(self._period_s)
            now = time.monotonic()
            used = _fs_used(self._root)
            if seen is not None and used is not None and base is not None and now - walked_at < self._walk_at_least_s:
                if seen[0] + used[0] - base[0] <= self._max_entries and seen[1] + used[1] - base[1] <= self._limit:
                    continue
            base, walked_at = used, now
            entries, size, over = workspace_usage(self._limit, self._root)
            seen = (entries, size)
            if over:
                self._on_over(entries > self._max_entries)
                return


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
