// The bench's "as deployed" gateway processes run under the memory limit the Helm chart gives the
// gateway container, in a memory cgroup of their own: Node sizes V8's heap from the cgroup's limit
// (at 512Mi a 2 MB young generation and a 259 MB heap limit; with no limit on a 24 GiB machine
// 32 MB and 4 GB), so a process without it neither holds nor spends what a deployed gateway does.
// Needs a writable memory cgroup (root; cgroup v1 or v2); otherwise says why and the caller runs
// the process without one.
import { mkdirSync, readFileSync, rmdirSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { parseQuantity } from '../src/config/quantity.js';

const VALUES = fileURLToPath(new URL('../charts/codemode-operator/values.yaml', import.meta.url));

export interface MemoryLimit {
  /** As the chart writes it, e.g. 512Mi. */
  quantity: string;
  bytes: number;
  /**
   * `cmd args` as a command that first moves itself into a new cgroup with this limit. The
   * cgroup is removed by `remove()` once the process has exited.
   */
  wrap(cmd: string, args: readonly string[]): { cmd: string; args: string[]; remove: () => void };
}

/** resources.limits.memory of the chart's gateway container. */
export function chartGatewayMemoryLimit(): string {
  const values = parse(readFileSync(VALUES, 'utf8')) as { resources?: { limits?: { memory?: unknown } } };
  const memory = values.resources?.limits?.memory;
  if (typeof memory !== 'string') throw new Error(`${VALUES} has no resources.limits.memory`);
  return memory;
}

/** Where new memory cgroups can be made, and the file their limit goes in. */
function cgroupParent(): { dir: string; limitFile: string } | string {
  const own = readFileSync('/proc/self/cgroup', 'utf8').split('\n');
  // cgroup v1 (possibly beside a v2 hierarchy without the memory controller): below our own group.
  const v1 = own.find((l) => l.split(':')[1]?.split(',').includes('memory'));
  if (v1 !== undefined && existsSync('/sys/fs/cgroup/memory'))
    return { dir: join('/sys/fs/cgroup/memory', v1.split(':')[2] ?? '/'), limitFile: 'memory.limit_in_bytes' };
  // cgroup v2: a group of our own directly under the root, whose controllers its children get.
  const controllers = existsSync('/sys/fs/cgroup/cgroup.subtree_control') ? readFileSync('/sys/fs/cgroup/cgroup.subtree_control', 'utf8') : '';
  if (controllers.split(/\s+/).includes('memory')) return { dir: '/sys/fs/cgroup', limitFile: 'memory.max' };
  return 'no memory cgroup controller is available to this process';
}

let made = 0;

/**
 * The chart's gateway memory limit as a cgroup wrapper, or why there is none. BENCH_GATEWAY_MEMORY_LIMIT
 * overrides it: another quantity, or `none` (an A/B of the heap sizing).
 */
export function gatewayMemoryLimit(): MemoryLimit | string {
  const override = process.env.BENCH_GATEWAY_MEMORY_LIMIT;
  if (override === 'none') return 'BENCH_GATEWAY_MEMORY_LIMIT=none';
  const quantity = override || chartGatewayMemoryLimit();
  let bytes: number;
  try {
    bytes = parseQuantity(quantity);
  } catch (err) {
    throw new Error(`${override ? 'BENCH_GATEWAY_MEMORY_LIMIT' : "the chart's resources.limits.memory"}=${quantity}: ${(err as Error).message}, or none`);
  }
  const parent = cgroupParent();
  if (typeof parent === 'string') return parent;
  const make = (): string => {
    const dir = join(parent.dir, `codemode-bench-${process.pid}-${++made}`);
    mkdirSync(dir);
    writeFileSync(join(dir, parent.limitFile), String(bytes));
    return dir;
  };
  // Try once now, so a machine where it cannot work says so before any measurement.
  try {
    rmdirSync(make());
  } catch (err) {
    return `cannot create a memory cgroup under ${parent.dir} (${(err as NodeJS.ErrnoException).code ?? String(err)})`;
  }
  return {
    quantity,
    bytes,
    wrap(cmd, args) {
      const dir = make();
      return {
        cmd: '/bin/sh',
        // $0 is the cgroup; the shell moves itself in, then becomes the command (same pid).
        args: ['-c', 'echo $$ > "$0/cgroup.procs" && exec "$@"', dir, cmd, ...args],
        remove: () => {
          try {
            rmdirSync(dir);
          } catch {
            // still has a process (killed later) or already gone: nothing to measure depends on it
          }
        },
      };
    },
  };
}
