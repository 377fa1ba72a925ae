'use strict';
// The sandbox's bounds as seen from inside the pod, as the Python kernel's bounds.py: did a call
// meet one? (runtime/PROTOCOL.md, `processLimit`, `oomKilled`, `diskFull`.)
// - Process cap: the kubelet's podPidsLimit sets pids.max of the pod's cgroup; a fork it refuses
//   increments the "max" counter in pids.events of the container's cgroup (v1 or v2 path).
// - Memory: the memory cgroup's oom_kill counter.
// - /tmp: a memory-backed emptyDir, a tmpfs with a hard size: statfs shows it full.
// - /workspace is not measured for a session call, as in bounds.py's `bounded`: on disk a write
//   past its limit does not fail, and the kubelet's eviction enforces it. A tmpfs /workspace
//   (workspaceMedium Memory) is full as /tmp is.
// Counters that cannot be read count as 0: outside a pod nothing is reported.
const fs = require('node:fs');

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

module.exports = { Watch };
