// The fixed program that runs a submitted piece of code inside a sandbox pod through one exec.
// The code never appears on a command line: its byte length is an argument, the code itself
// arrives on stdin (read exactly with dd), and whatever follows on stdin is the program's stdin.
// `timeout` runs the program in its own process group and kills the whole group on expiry, so an
// infinite loop (and anything it forked) is gone from the pod when the run reports TimedOut.
import { randomBytes } from 'node:crypto';
import type { Runtime } from '../api/v1alpha1/index.js';

/** Grace between TERM and KILL at the deadline. */
export const KILL_GRACE_SECONDS = 1;

// $1 runtime, $2 timeout seconds, $3 code bytes, $4 nonce for the trailer.
// The trailer is the last thing written to stderr: "\x1e<nonce> <rc> <timedOut> <oomKills>\n".
export const RUNNER_SCRIPT = `
rt="$1"; t="$2"; n="$3"; nonce="$4"
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
oom() { c=0; for p in /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events; do
  [ -r "$p" ] && c=$(sed -n 's/^oom_kill //p' "$p") && break; done; echo "\${c:-0}"; }
o0=$(oom); s0=$(date +%s)
cd /workspace 2>/dev/null || cd /tmp
timeout -k ${KILL_GRACE_SECONDS} "$t" "$@"
rc=$?
s1=$(date +%s); o1=$(oom)
to=0; if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then [ $((s1 - s0)) -ge "$t" ] && to=1; fi
rm -rf "$d"
printf '\\036%s %s %s %s\\n' "$nonce" "$rc" "$to" "$((o1 - o0))" >&2
exit "$rc"
`;

export function newNonce(): string {
  return `cm${randomBytes(8).toString('hex')}`;
}

export function runnerCommand(runtime: Runtime, timeoutSeconds: number, codeBytes: number, nonce: string): string[] {
  return ['/bin/sh', '-c', RUNNER_SCRIPT, 'codemode-runner', runtime, String(timeoutSeconds), String(codeBytes), nonce];
}

export interface RunnerTrailer {
  exitCode: number;
  timedOut: boolean;
  oomKilled: boolean;
  /** Length of the trailer in bytes, to subtract from stderr's byte count. */
  bytes: number;
}

/** Finds the runner's trailer at the end of stderr's last bytes. */
export function parseTrailer(tail: Buffer, nonce: string): RunnerTrailer | undefined {
  const text = tail.toString('latin1');
  const at = text.lastIndexOf(`\x1e${nonce} `);
  if (at < 0) return undefined;
  const m = /^\x1e\S+ (-?\d+) ([01]) (-?\d+)\n$/.exec(text.slice(at));
  if (!m) return undefined;
  return { exitCode: Number(m[1]), timedOut: m[2] === '1', oomKilled: Number(m[3]) > 0, bytes: text.length - at };
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
