'use strict';
// Finding and killing the processes a call started, from /proc (the same rules as the Python
// kernel's procs.py): descendants of the kernel whose start time (clock ticks since boot,
// /proc/<pid>/stat field 22) is not before the call's start. USER_HZ is 100 on Linux.
//
// In a sandbox pod the kernel is a root of the pod's PID namespace (its parent, the container
// runtime, is outside it: ppid 0). A process whose parent died is reparented to PID 1 (the pause
// process), out of the kernel's tree: everything a detached child, a `setsid` escapee or a fork
// bomb leaves behind. There, such orphans started since the call are the call's too. Outside a pod
// (the unit tests run the kernel on the developer's machine) orphans are never touched: PID 1 is
// the machine's init and they belong to anyone.
const fs = require('node:fs');

const HZ = 100;
/** Passes of each sweep (stop, then kill) before giving up on processes that keep appearing. */
const SWEEP_PASSES = 300;

/** Clock ticks since boot, from /proc/uptime (same clock as the start times). */
function nowTicks() {
  return Math.floor(Number(fs.readFileSync('/proc/uptime', 'latin1').split(' ')[0]) * HZ);
}

/** True when this process's parent is outside its PID namespace (the kernel in a sandbox pod). */
function inPodRoot() {
  return process.ppid === 0;
}

/** pid → { ppid, start, state } for every process we can see. */
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
    procs.set(Number(name), { ppid: Number(fields[1]), start: Number(fields[19]), state: fields[0] });
  }
  return procs;
}

/**
 * Descendants of `root` started at or after `sinceTicks`, parents before children; in a pod also
 * the orphans (and their descendants) started since then. Zombies left out: they hold no CPU and
 * take no signal.
 */
function descendantsSince(root, sinceTicks, procs = table()) {
  const children = new Map();
  for (const [pid, p] of procs) {
    if (!children.has(p.ppid)) children.set(p.ppid, []);
    children.get(p.ppid).push(pid);
  }
  const tops = [root];
  if (inPodRoot()) tops.push(...(children.get(1) || []).filter((pid) => pid !== root && procs.get(pid).start >= sinceTicks));
  const found = tops.slice(1);
  const queue = tops.slice();
  while (queue.length > 0) {
    for (const pid of children.get(queue.shift()) || []) {
      queue.push(pid);
      if (procs.get(pid).start >= sinceTicks) found.push(pid);
    }
  }
  return found.filter((pid) => procs.get(pid).state !== 'Z');
}

function signalAll(pids, signal) {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // already gone
    }
  }
}

/**
 * SIGKILLs the processes the call started; returns their pids. They are first stopped, pass
 * after pass until none of them runs, then killed: a stopped process neither forks nor competes
 * for the CPU, where killing a live fork bomb one by one may never catch up.
 */
function killStartedSince(root, sinceTicks) {
  const seen = new Set();
  for (let i = 0; i < SWEEP_PASSES; i++) {
    const procs = table();
    const live = descendantsSince(root, sinceTicks, procs);
    for (const pid of live) seen.add(pid);
    const running = live.filter((pid) => procs.get(pid).state !== 'T');
    if (running.length === 0) break;
    signalAll(running, 'SIGSTOP');
  }
  for (let i = 0; i < SWEEP_PASSES; i++) {
    const live = descendantsSince(root, sinceTicks);
    if (live.length === 0) break;
    for (const pid of live) seen.add(pid);
    signalAll(live, 'SIGKILL');
  }
  return [...seen].sort((a, b) => a - b);
}

module.exports = { nowTicks, killStartedSince };
