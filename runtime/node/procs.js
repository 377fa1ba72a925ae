'use strict';
// Finding and killing the processes a call started, from /proc (same rule as the Python
// kernel's procs.py): descendants of the kernel whose start time (clock ticks since boot,
// /proc/<pid>/stat field 22) is not before the call's start. USER_HZ is 100 on Linux.
const fs = require('node:fs');

const HZ = 100;

/** Clock ticks since boot, from /proc/uptime (same clock as the start times). */
function nowTicks() {
  return Math.floor(Number(fs.readFileSync('/proc/uptime', 'latin1').split(' ')[0]) * HZ);
}

function table() {
  const procs = new Map();
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let stat;
    try {
      stat = fs.readFileSync(`/proc/${name}/stat`, 'latin1');
    } catch {
      continue; // exited meanwhile
    }
    // The command name may contain spaces and parentheses: split after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    procs.set(Number(name), { ppid: Number(fields[1]), start: Number(fields[19]) });
  }
  return procs;
}

/** SIGKILLs the descendants of `root` started at or after `sinceTicks`; returns their pids. */
function killStartedSince(root, sinceTicks) {
  const procs = table();
  const children = new Map();
  for (const [pid, p] of procs) {
    if (!children.has(p.ppid)) children.set(p.ppid, []);
    children.get(p.ppid).push(pid);
  }
  const killed = [];
  const queue = [root];
  while (queue.length > 0) {
    for (const pid of children.get(queue.shift()) || []) {
      queue.push(pid);
      if (procs.get(pid).start < sinceTicks) continue;
      try {
        process.kill(pid, 'SIGKILL');
        killed.push(pid);
      } catch {
        // already gone
      }
    }
  }
  return killed;
}

module.exports = { nowTicks, killStartedSince };
