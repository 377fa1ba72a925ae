// The fixed program that runs a submitted piece of code inside a sandbox pod through one exec.
// The code never appears on a command line: its byte length is an argument, the code itself
// arrives on stdin (read exactly with dd), and whatever follows on stdin is the program's stdin.
// `timeout` runs the program in its own process group and kills the whole group on expiry, so an
// infinite loop (and anything it forked) is gone from the pod when the run reports TimedOut.
import { randomBytes } from 'node:crypto';
import type { Runtime } from '../api/v1alpha1/index.js';
import { WORKSPACE_MIN_ENTRY_BYTES } from '../sandbox/pod.js';

/** Grace between TERM and KILL at the deadline. */
export const KILL_GRACE_SECONDS = 1;

/** Below this many free KiB, /tmp (a tmpfs with a hard size) counts as full. */
export const TMP_FULL_KIB = 256;
/**
 * How often the runner measures /workspace against its limit. A program writing at disk speed
 * (~0.5 GB/s on the test machine) overshoots by about this long's worth of data: measured with 1 s,
 * 900 MB over a 64Mi limit.
 */
export const WORKSPACE_CHECK_SECONDS = 0.2;

/**
 * With CODEMODE_NETWORK_CHECK=1 (sandbox pods, src/sandbox/pod.ts) the runner starts the program
 * only once the pod cannot connect to the API server's Service — refused, or no answer within
 * 0.3 s — checking every 10 ms as the kernels do (after 2 s, and in bash, every 50 ms) for this
 * many seconds at most, then refuses the run. A CNI that programs a new pod's NetworkPolicy a
 * moment after it started must not let code run in that moment.
 */
export const NETWORK_CHECK_SECONDS = 10;

/** How the check programs below exit: the pod's connect refused, unanswered for 0.3 s, or still reaching at the end. */
export const NETWORK_CHECK_EXIT = { refused: 0, unanswered: 4, reachable: 3 } as const;

/**
 * The check in Python, run as `python3 -I -S -c NETWORK_CHECK_PY host port`. Its connect is
 * non-blocking and it reads SO_ERROR while it waits: a blocking connect (bash's /dev/tcp, or
 * python's without a timeout) to the Service under kube-router's REJECT rule sees the ICMP
 * port-unreachable only on its SYN's retransmission a second later (docs/performance.md,
 * 2026-12-03 23:45), so the check would pass on its 0.3 s timer instead, on every cold run of an image
 * without our kernel. An address or port it cannot connect to at all counts as refused, as in
 * bash's /dev/tcp before it.
 */
export const NETWORK_CHECK_PY = `import errno, select, socket, sys, time
def reached(host, port):
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)[0]
        s = socket.socket(family, kind, proto)
    except Exception:
        return ${NETWORK_CHECK_EXIT.refused}
    try:
        s.setblocking(False)
        r = s.connect_ex(address)
        if r == 0:
            return None
        if r not in (errno.EINPROGRESS, errno.EAGAIN):
            return ${NETWORK_CHECK_EXIT.refused}
        end = time.monotonic() + 0.3
        while True:
            left = end - time.monotonic()
            writable = select.select([], [s], [], max(0.0, min(0.01, left)))[1]
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                return ${NETWORK_CHECK_EXIT.refused}
            if writable:
                return None
            if left <= 0:
                return ${NETWORK_CHECK_EXIT.unanswered}
    except OSError:
        return ${NETWORK_CHECK_EXIT.refused}
    finally:
        s.close()
try:
    port = int(sys.argv[2])
except ValueError:
    port = 443
start = time.monotonic()
while True:
    isolated = reached(sys.argv[1], port)
    if isolated is not None:
        sys.exit(isolated)
    if time.monotonic() - start >= ${NETWORK_CHECK_SECONDS}:
        sys.exit(${NETWORK_CHECK_EXIT.reachable})
    time.sleep(0.01 if time.monotonic() - start < 2 else 0.05)
`;

/** The check in Node, run as `node -e NETWORK_CHECK_JS host port`: net.connect is non-blocking too. */
export const NETWORK_CHECK_JS = `const net = require("net");
const host = process.argv[1];
const port = /^[0-9]+$/.test(process.argv[2] || "") && +process.argv[2] < 65536 ? +process.argv[2] : 443;
const start = Date.now();
const once = () => new Promise((done) => {
  let s;
  try { s = net.connect({ host, port }); } catch { return done(${NETWORK_CHECK_EXIT.refused}); }
  const timer = setTimeout(() => { s.destroy(); done(${NETWORK_CHECK_EXIT.unanswered}); }, 300);
  s.once("connect", () => { clearTimeout(timer); s.destroy(); done(null); });
  s.once("error", () => { clearTimeout(timer); done(${NETWORK_CHECK_EXIT.refused}); });
});
(async () => {
  for (;;) {
    const isolated = await once();
    if (isolated !== null) process.exit(isolated);
    if (Date.now() - start >= ${NETWORK_CHECK_SECONDS} * 1000) process.exit(${NETWORK_CHECK_EXIT.reachable});
    await new Promise((r) => setTimeout(r, Date.now() - start < 2000 ? 10 : 50));
  }
})();
`;

/** The codes a check program exits with; any other hands the check to the next program. */
const CHECK_CODES = Object.values(NETWORK_CHECK_EXIT).join('|');

/**
 * The check, a POSIX sh fragment: python3's, else node's, else bash's (whose blocking /dev/tcp
 * connect passes on the timer: see NETWORK_CHECK_PY); a program that exits otherwise than the
 * check's codes (a broken interpreter, whose messages go nowhere, not into the run's stderr)
 * hands over to the next one, and without any of them the check is skipped. Each program times its connects itself, after it started: a
 * `timeout 0.3 bash -c connect` also counted bash's own start-up, and on a loaded node (a full test
 * suite, load 30) bash took longer than that to start, so a pod that could reach the API server
 * passed as isolated. In bash one shell runs the loop and each connect is a forked subshell of it;
 * the timer is a builtin wait on a sleep that the timer itself kills when the connect ended first:
 * nothing of the check outlives it (the runner counts processes left behind by the program). Their
 * stdin is not the runner's (that carries the code), and bash reads no rc file (it would source
 * ~/.bashrc when its stdin is a socket).
 */
export const NETWORK_CHECK_SCRIPT = `if [ "\${CODEMODE_NETWORK_CHECK:-}" = 1 ] && [ -n "\${KUBERNETES_SERVICE_HOST:-}" ]; then
  nr=
  command -v python3 >/dev/null 2>&1 && { python3 -I -S -c '${NETWORK_CHECK_PY}' "$KUBERNETES_SERVICE_HOST" "\${KUBERNETES_SERVICE_PORT:-443}" </dev/null >/dev/null 2>&1; nr=$?; }
  case "$nr" in ${CHECK_CODES}) ;; *) command -v node >/dev/null 2>&1 && { node -e '${NETWORK_CHECK_JS}' "$KUBERNETES_SERVICE_HOST" "\${KUBERNETES_SERVICE_PORT:-443}" </dev/null >/dev/null 2>&1; nr=$?; };; esac
  case "$nr" in ${CHECK_CODES}) ;; *) command -v bash >/dev/null 2>&1 && { bash --norc --noprofile -c 't0=$SECONDS
    while :; do
      ( exec 3<>"/dev/tcp/$0/$1" ) 2>/dev/null & c=$!
      ( trap "kill \\$s 2>/dev/null; exit 0" TERM; sleep 0.3 & s=$!; wait $s; kill $c 2>/dev/null ) & w=$!
      wait $c; r=$?
      kill $w 2>/dev/null; wait $w 2>/dev/null
      [ $r -gt 128 ] && exit ${NETWORK_CHECK_EXIT.unanswered}
      [ $r -ne 0 ] && exit ${NETWORK_CHECK_EXIT.refused}
      [ $((SECONDS - t0)) -ge ${NETWORK_CHECK_SECONDS} ] && exit ${NETWORK_CHECK_EXIT.reachable}
      sleep 0.05
    done' "$KUBERNETES_SERVICE_HOST" "\${KUBERNETES_SERVICE_PORT:-443}" </dev/null; nr=$?; };; esac
  [ "$nr" = ${NETWORK_CHECK_EXIT.reachable} ] && { echo "codemode: the sandbox pod could still reach the network ${NETWORK_CHECK_SECONDS} s after it started (its NetworkPolicy is not enforced), so the code was not run. Tell the administrator." >&2; exit 125; }
fi
`;

// $1 runtime, $2 timeout seconds, $3 code bytes, $4 nonce for the trailer.
// $CODEMODE_WORKSPACE_LIMIT_BYTES (pod env) is the /workspace limit the runner enforces itself.
// $CODEMODE_FILE_LIMIT_BYTES (pod env, FILE_LIMIT_ENV) is the largest file the program may write:
// a hard RLIMIT_FSIZE it cannot raise (an exec'd process does not inherit the container's own).
// RLIMIT_CORE is 0, hard too (CORE_LIMIT in sandbox/pod.ts says why).
// The trailer is the last thing written to stderr:
//   "\x1e<nonce> <rc> <timedOut> <oomKills> <forkFailures> <fullVolume|-> <leftovers>\n"
// where leftovers counts the program's processes still running when it ended (then killed).
//
// Bounds (why each is measured here, in the pod): the process cap is the pod cgroup's pids.max
// (kubelet podPidsLimit); a fork refused by it increments the "max" counter of pids.events in the
// container's own cgroup, which the container can read. /tmp is a tmpfs with a hard size, so a
// write past it fails at once with ENOSPC and df shows it full. /workspace is on the node's disk by
// default, where the kubelet enforces sizeLimit only by evicting the pod a while later: the runner
// measures it every WORKSPACE_CHECK_SECONDS (du, and find for the entries, each counted as at least
// WORKSPACE_MIN_ENTRY_BYTES: empty files take no blocks, and nothing else bounds the node's inodes
// a pod uses) and stops the program when it is over its limit.
// Where it is a tmpfs (workspaceMedium Memory, CODEMODE_WORKSPACE_LIMIT_BYTES 0) it is full as /tmp is.
//
// After the program (or its deadline), every process left in the pod is killed before anything
// else forks: a fork bomb's survivors would otherwise hold every PID the runner needs, and a
// process that escaped the program's group (setsid) would hold the output pipes open. Only
// builtins run until then. They are stopped first (SIGSTOP, pass after pass until none runs), then
// killed: a stopped process neither forks nor competes for the container's CPU quota, where a
// runner killing a live fork bomb one by one gets a hundredth of the CPU and may never catch up.
// The processes kept are those whose parent is outside the pod's PID namespace (ppid 0): the
// pause process, the container's own command and exec'd processes such as this runner.
export const RUNNER_SCRIPT = `
rt="$1"; t="$2"; n="$3"; nonce="$4"; sn="\${5:-0}"
fl="\${CODEMODE_FILE_LIMIT_BYTES:-0}"
[ "$fl" -gt 0 ] && { ulimit -f "$((fl / 512))" || { echo "codemode: cannot set the file size limit (ulimit -f)" >&2; exit 125; }; }
ulimit -c 0 || { echo "codemode: cannot turn core dumps off (ulimit -c)" >&2; exit 125; }
d="$(mktemp -d /tmp/.codemode.XXXXXX)" || { echo "codemode: cannot create a directory in /tmp" >&2; exit 125; }
case "$rt" in python) f="$d/main.py";; node) f="$d/main.js";; *) f="$d/main.sh";; esac
if [ "$n" -gt 0 ]; then dd of="$f" bs="$n" count=1 iflag=fullblock status=none || exit 125; else : > "$f"; fi
case "$rt" in
  python) set -- python3 -u "$f";;
  node) set -- node "$f";;
  bash) set -- bash "$f";;
  sh) set -- sh "$f";;
  *) echo "codemode: unknown runtime $rt" >&2; exit 125;;
esac
count() { c=0; for p in "$@"; do [ -r "$p" ] || continue
  while read -r k v; do [ "$k" = "$w" ] && c=$v; done < "$p"; break; done; }
oom() { w=oom_kill; count /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events; }
forkfail() { w=max; count /sys/fs/cgroup/pids/pids.events /sys/fs/cgroup/pids.events; }
sweep() { sig=STOP; i=0; left=0; while [ $i -lt 300 ]; do i=$((i + 1)); k=0
  for s in /proc/[0-9]*/stat; do
    read -r l 2>/dev/null < "$s" || continue
    p=\${s#/proc/}; p=\${p%/stat}; [ "$p" = "$$" ] && continue
    set -f; set -- \${l##*") "}; set +f; { [ "$1" = Z ] || [ "$2" = 0 ]; } && continue
    [ $sig = STOP ] && [ "$1" = T ] && continue
    kill -$sig "$p" 2>/dev/null && k=1 && [ $i = 1 ] && { [ "$3" = "$tp" ] || [ "$2" = 1 ]; } && left=$((left + 1))
  done; [ $k = 0 ] && { [ $sig = KILL ] && return; sig=KILL; }; done; }
wskib() { u=$(du -sk /workspace 2>/dev/null) && echo "\${u%%[!0-9]*}"; }
wl=$((\${CODEMODE_WORKSPACE_LIMIT_BYTES:-0} / 1024))
wn=$((wl / ${WORKSPACE_MIN_ENTRY_BYTES / 1024} + 1))
wsover() { u=$(wskib); [ "\${u:-0}" -gt "$wl" ] && return 0
  [ -n "$(find /workspace -xdev -type d ! -perm -500 2>/dev/null | head -n 1)" ] && return 0
  d=$(find /proc/[0-9]*/fd -lname '/workspace/* (deleted)' -exec du -kL {} + 2>/dev/null | { n=0; s=0; while read -r k _; do n=$((n + 1)); s=$((s + k)); done; echo "$n $s"; })
  dn=\${d% *}; dk=\${d#* }
  [ $((\${u:-0} + \${dk:-0})) -gt "$wl" ] && return 0
  e=$(find /workspace -xdev 2>/dev/null | head -n "$((wn + 1))" | wc -l); [ $((\${e:-0} + \${dn:-0})) -gt "$wn" ]; }
${NETWORK_CHECK_SCRIPT}oom; o0=$c; forkfail; f0=$c; s0=$(date +%s)
cd /workspace 2>/dev/null || cd /tmp
exec 3<&0
timeout -k ${KILL_GRACE_SECONDS} "$t" "$@" <&3 3<&- &
tp=$!
exec 3<&-
wp=0
if [ "$wl" -gt 0 ] && [ -d /workspace ]; then
  ( while sleep ${WORKSPACE_CHECK_SECONDS}; do wsover && { kill -9 -"$tp"; exit 3; }; done ) >/dev/null 2>&1 &
  wp=$!
fi
wait "$tp"; rc=$?
sweep
[ "$sn" -gt 0 ] && timeout 5 cat > /dev/null 2>&1
ws=0; [ "$wp" -gt 0 ] && { wait "$wp"; ws=$?; }
s1=$(date +%s); oom; o1=$c; forkfail; f1=$c
to=0; if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then [ $((s1 - s0)) -ge "$t" ] && to=1; fi
rm -rf "$d"
full=-
if [ "$ws" -eq 3 ]; then full=workspace
elif [ "$wl" -gt 0 ] && wsover; then full=workspace
elif [ "$wl" -eq 0 ] && set -- $(df -Pk /workspace 2>/dev/null | sed -n 2p); [ -n "$4" ] && [ "$4" -lt ${TMP_FULL_KIB} ]; then full=workspace
else set -- $(df -Pk /tmp 2>/dev/null | sed -n 2p); [ -n "$4" ] && [ "$4" -lt ${TMP_FULL_KIB} ] && full=tmp; fi
printf '\\036%s %s %s %s %s %s %s\\n' "$nonce" "$rc" "$to" "$((o1 - o0))" "$((f1 - f0))" "$full" "$left" >&2
exit "$rc"
`;

export function newNonce(): string {
  return `cm${randomBytes(8).toString('hex')}`;
}

/**
 * The runner's command line: fixed words and numbers, never the code. `stdinBytes` (the program's
 * stdin, after the code): what of it the program left unread the runner reads after the program
 * ended, at most 5 s, for an exec whose stdin is left unread may not answer before its watchdog
 * (1 MiB of stdin to `print(1)` waited out all 40 s of it, 4 of 4 on the cluster).
 */
export function runnerCommand(runtime: Runtime, timeoutSeconds: number, codeBytes: number, nonce: string, stdinBytes = 0): string[] {
  return ['/bin/sh', '-c', RUNNER_SCRIPT, 'codemode-runner', runtime, String(timeoutSeconds), String(codeBytes), nonce, String(stdinBytes)];
}

export interface RunnerTrailer {
  exitCode: number;
  timedOut: boolean;
  oomKilled: boolean;
  /** A fork failed at the sandbox's process cap during the run. */
  processLimit: boolean;
  /** A volume that was full (or over its limit) at the end of the run. */
  diskFull?: 'workspace' | 'tmp';
  /** The program's processes still running when it ended (killed then). */
  leftovers: number;
  /** Length of the trailer in bytes, to subtract from stderr's byte count. */
  bytes: number;
}

/**
 * Finds the runner's trailer at the end of stderr's last bytes. The nonce tells the trailer from
 * what a careless program prints, not from a hostile one: the program runs as the runner's user
 * in its pod and can read the nonce (the runner's command line, its memory) and print a trailer
 * of its own. So every field is held to what the runner itself can print — an exit status 0–255,
 * counters of at most 9 digits — and anything else is no trailer at all. A forged one that fits
 * can only misreport its own run.
 */
export function parseTrailer(tail: Buffer, nonce: string): RunnerTrailer | undefined {
  const text = tail.toString('latin1');
  const at = text.lastIndexOf(`\x1e${nonce} `);
  if (at < 0) return undefined;
  const m = /^\x1e\S+ (\d{1,3}) ([01]) (-?\d{1,9}) (-?\d{1,9}) (-|workspace|tmp) (\d{1,9})\n$/.exec(text.slice(at));
  if (!m || Number(m[1]) > 255) return undefined;
  const full = m[5] === 'workspace' || m[5] === 'tmp' ? m[5] : undefined;
  return {
    exitCode: Number(m[1]),
    timedOut: m[2] === '1',
    oomKilled: Number(m[3]) > 0,
    processLimit: Number(m[4]) > 0,
    ...(full !== undefined && { diskFull: full }),
    leftovers: Number(m[6]),
    bytes: text.length - at,
  };
}

/** Removes the trailer (or the part of it that was kept before the cap) from stderr's text. */
export function stripTrailer(stderr: string, nonce: string): string {
  const marker = `\x1e${nonce} `;
  const at = stderr.lastIndexOf('\x1e');
  if (at < 0) return stderr;
  const rest = stderr.slice(at);
  if (rest.startsWith(marker) || marker.startsWith(rest)) return stderr.slice(0, at);
  return stderr;
}
