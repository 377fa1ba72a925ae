'use strict';
// The sandbox's bounds as seen from inside the pod, as the Python kernel's bounds.py: did a call
// meet one? (runtime/PROTOCOL.md, `processLimit`, `oomKilled`, `diskFull`.)
// - Process cap: the kubelet's podPidsLimit sets pids.max of the pod's cgroup; a fork it refuses
//   increments the "max" counter in pids.events of the container's cgroup (v1 or v2 path).
// - Memory: the memory cgroup's oom_kill counter.
// - /tmp: a memory-backed emptyDir, a tmpfs with a hard size: statfs shows it full.
// - /workspace is not measured for a session call, as in bounds.py's `bounded`: on disk a write
//   past its limit does not fail. The watchdog's WorkspaceGuard ends a session whose /workspace on
//   disk is past its limit, as bounds.py's does. A tmpfs /workspace (workspaceMedium Memory) is
//   full as /tmp is.
// Counters that cannot be read count as 0: outside a pod nothing is reported.
const fs = require('node:fs');
const path = require('node:path');

const TMP = '/tmp';
const WORKSPACE = '/workspace';
const TMP_FULL_BYTES = 256 * 1024;
const OOM = ['/sys/fs/cgroup/memory/memory.oom_control', '/sys/fs/cgroup/memory.events'];
const FORKS = ['/sys/fs/cgroup/pids/pids.events', '/sys/fs/cgroup/pids.events'];

// Each counter file, found once (v1 or v2 path) and kept open: a call reads it with one pread (a
// failed open costs tens of microseconds, each call). -1: no path could be opened.
const fds = new Map();
const buf = Buffer.alloc(4096);

/** A counter file's contents now ('' when none of its paths can be read). */
function read(paths) {
  let fd = fds.get(paths);
  if (fd === undefined) {
    fd = -1;
    for (const p of paths) {
      try {
        fd = fs.openSync(p, fs.constants.O_RDONLY);
        break;
      } catch {
        // the other cgroup version's path, or not in a pod
      }
    }
    fds.set(paths, fd);
  }
  if (fd < 0) return '';
  try {
    return buf.toString('latin1', 0, fs.readSync(fd, buf, 0, buf.length, 0));
  } catch {
    return '';
  }
}

/** The value of `key` in a flat-keyed cgroup file, 0 when absent or unreadable. */
function counter(paths, key) {
  for (const line of read(paths).split('\n')) {
    const parts = line.trim().split(/\s+/);
    if (parts.length === 2 && parts[0] === key && /^\d+$/.test(parts[1])) return Number(parts[1]);
  }
  return 0;
}

const oomKills = () => counter(OOM, 'oom_kill');
const forkFailures = () => counter(FORKS, 'max');

/** Whether `path`'s filesystem has (nearly) no room left: one statfs. */
function full(path) {
  if (typeof fs.statfsSync !== 'function') return false; // Node before 18.15
  try {
    const s = fs.statfsSync(path);
    return s.bavail * s.bsize < TMP_FULL_BYTES;
  } catch {
    return false;
  }
}

/** The counters at the start of a call; report() says which bounds the call met since. */
class Watch {
  constructor() {
    this.oom = oomKills();
    this.forks = forkFailures();
  }

  report() {
    return {
      oomKilled: oomKills() > this.oom,
      processLimit: forkFailures() > this.forks,
      ...(full(WORKSPACE) ? { diskFull: 'workspace' } : full(TMP) && { diskFull: 'tmp' }),
    };
  }
}

// What each entry of /workspace counts at least (WORKSPACE_MIN_ENTRY_BYTES in bounds.py and
// src/sandbox/pod.ts): empty files take no blocks, and nothing else bounds a pod's inodes.
const WORKSPACE_MIN_ENTRY_BYTES = 4096;
// The kernel's exit status when the guard ended it (bounds.py, src/sandbox/pod-failure.ts).
const WORKSPACE_OVER_EXIT_CODE = 4;
const GUARD_PERIOD_MS = 200;
const GUARD_WALK_AT_LEAST_MS = 60_000;

/** /workspace's size limit in bytes from the pod's env, 0 when unknown (a tmpfs: nothing to walk). */
function workspaceLimit() {
  const v = Number(process.env.CODEMODE_WORKSPACE_LIMIT_BYTES ?? '0');
  return Number.isSafeInteger(v) && v > 0 ? v : 0;
}

/**
 * { entries, bytes, over } of /workspace, as bounds.py's workspace_usage: its entries, the blocks
 * they take, and the deleted files there that processes of the pod hold open (du cannot see them,
 * and a program can go on writing to them); and whether either is past `limit` (entries at
 * WORKSPACE_MIN_ENTRY_BYTES each). A directory it cannot read or search makes it over (code can
 * create files in a directory it took read permission from; its owner, the sandbox's user, can
 * give it back). Stops as soon as it is over.
 */
function workspaceUsage(limit, root = WORKSPACE, proc = '/proc') {
  const maxEntries = Math.floor(limit / WORKSPACE_MIN_ENTRY_BYTES);
  let entries = 0;
  let bytes = 0;
  const stack = [root];
  while (stack.length > 0) {
    const dir = stack.pop();
    let names;
    try {
      names = fs.readdirSync(dir, { withFileTypes: true });
    } catch (err) {
      if (err.code === 'EACCES') return { entries, bytes, over: true };
      continue; // gone since it was listed
    }
    for (const d of names) {
      entries++;
      if (entries > maxEntries) return { entries, bytes, over: true };
      const p = path.join(dir, d.name);
      if (d.isDirectory()) stack.push(p);
      else {
        try {
          bytes += fs.lstatSync(p).blocks * 512;
        } catch (err) {
          if (err.code === 'EACCES') return { entries, bytes, over: true };
          continue;
        }
      }
      if (bytes > limit) return { entries, bytes, over: true };
    }
  }
  return deletedOpen(limit, maxEntries, entries, bytes, root, proc);
}

/** workspaceUsage's count with the deleted files under `root` that processes hold open (/proc/<pid>/fd; each inode once). */
function deletedOpen(limit, maxEntries, entries, bytes, root, proc) {
  const prefix = `${root.replace(/\/+$/, '')}/`;
  const inodes = new Set();
  let pids;
  try {
    pids = fs.readdirSync(proc).filter((p) => /^[0-9]+$/.test(p));
  } catch {
    return { entries, bytes, over: false };
  }
  for (const pid of pids) {
    let fds;
    try {
      fds = fs.readdirSync(`${proc}/${pid}/fd`);
    } catch {
      continue; // not ours to read (the pod's pause process), or gone
    }
    for (const fd of fds) {
      const p = `${proc}/${pid}/fd/${fd}`;
      let st;
      try {
        if (!fs.readlinkSync(p).startsWith(prefix)) continue;
        st = fs.statSync(p, { bigint: true });
      } catch {
        continue;
      }
      const key = `${st.dev}:${st.ino}`;
      if (st.nlink !== 0n || inodes.has(key)) continue;
      inodes.add(key);
      entries++;
      bytes += Number(st.blocks) * 512;
      if (entries > maxEntries || bytes > limit) return { entries, bytes, over: true };
    }
  }
  return { entries, bytes, over: false };
}

/** [inodes, bytes] in use on `dir`'s filesystem, or undefined. */
function fsUsed(dir) {
  if (typeof fs.statfsSync !== 'function') return undefined;
  try {
    const s = fs.statfsSync(dir);
    return [s.files - s.ffree, (s.blocks - s.bfree) * s.bsize];
  } catch {
    return undefined;
  }
}

/**
 * Calls `onOver(files)` once a session's /workspace on disk is past `limit`, as bounds.py's
 * WorkspaceGuard: a statfs five times a second, a walk only when what the filesystem gained since
 * the last walk could have put /workspace past its limit (and at least once a minute). Runs in the
 * watchdog's thread, which keeps running while code holds the kernel's main thread.
 */
function startWorkspaceGuard(limit, onOver, { root = WORKSPACE, periodMs = GUARD_PERIOD_MS, walkAtLeastMs = GUARD_WALK_AT_LEAST_MS } = {}) {
  if (limit <= 0) return undefined;
  const maxEntries = Math.floor(limit / WORKSPACE_MIN_ENTRY_BYTES);
  let seen;
  let base;
  let walkedAt = 0;
  const timer = setInterval(() => {
    const now = Date.now();
    const used = fsUsed(root);
    if (seen && used && base && now - walkedAt < walkAtLeastMs) {
      if (seen.entries + used[0] - base[0] <= maxEntries && seen.bytes + used[1] - base[1] <= limit) return;
    }
    base = used;
    walkedAt = now;
    seen = workspaceUsage(limit, root);
    if (seen.over) {
      clearInterval(timer);
      onOver(seen.entries > maxEntries);
    }
  }, periodMs);
  return timer;
}

module.exports = { Watch, workspaceLimit, workspaceUsage, startWorkspaceGuard, WORKSPACE_OVER_EXIT_CODE };
