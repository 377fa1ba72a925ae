// The pid of a gateway replica the bench started as a child process (gateway-process.ts), found by
// its command line and port: the process to read CPU time and memory of.
import { readFileSync, readdirSync } from 'node:fs';

/** The gateway child's pid: the process whose command line runs gateway-child.ts on `port`. */
export function gatewayPid(port: number): number | undefined {
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      const env = readFileSync(`/proc/${pid}/environ`, 'utf8');
      if (cmd.includes('gateway-child') && env.split('\0').includes(`CODEMODE_PORT=${port}`)) return Number(pid);
    } catch {
      // exited, or not ours to read
    }
  }
  return undefined;
}
