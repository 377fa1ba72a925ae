// describe(server) and describe(server, tool) answers (a search's hits too), measured and cut once
// per catalog version and detail level and shared by the runs of the process. A run may ask 1,000
// times; measuring and cutting an 11.6 MB catalog took up to 283 ms each time, and 105 s of one
// run; one tool of 500,000 parameters (an upstream's catalog is up to 8 pages of 16 MiB) ~1 s
// each time. An answer depends on the server, its catalog's version (equal only for equal
// catalogs, whoever asks: UpstreamCaller.catalogVersion), the detail level, the tool and the cut
// limit (the broker's own, fixed): the key. The broker checks the run may use the server before
// it looks here.
import { cutToBytes, jsonBytes } from './cut.js';
import type { Detail } from './frames.js';

/** A value for the program, cut to the result size, with the bytes of its JSON. */
export interface Prepared {
  value: unknown;
  cut?: string;
  bytes: number;
}

export function prepare(value: unknown, maxBytes: number): Prepared {
  const c = cutToBytes(value, maxBytes);
  return { value: c.value, ...(c.cut !== undefined && { cut: c.cut }), bytes: jsonBytes(c.value) };
}

/** Servers whose answers are kept; past it all are dropped (servers are admin-defined: few). */
export const MAX_DESCRIBED_SERVERS = 256;
/**
 * JSON bytes of the answers kept, all servers together (an uncut answer is mostly the catalog's own
 * objects, counted anyway); past it all are dropped. An answer is at most the result size (64 KiB
 * by default): a thousand of the largest fit, so a hostile catalog holds at most this much here.
 */
export const MAX_DESCRIBED_BYTES = 64 * 1024 * 1024;

export class DescribedCatalogs {
  /** Per server, the answers for one version: a new version replaces them. */
  private readonly servers = new Map<string, { version: string; answers: Map<string, Prepared> }>();
  private bytes = 0;

  /** The answer to describe(server) at `detail`, or to describe(server, tool) when `tool` is given. */
  get(server: string, version: string, detail: Detail, tool?: string): Prepared | undefined {
    const s = this.servers.get(server);
    return s?.version === version ? s.answers.get(key(detail, tool)) : undefined;
  }

  set(server: string, version: string, detail: Detail, answer: Prepared, tool?: string): void {
    const k = key(detail, tool);
    let s = this.servers.get(server);
    if (s && s.version !== version) {
      for (const a of s.answers.values()) this.bytes -= a.bytes;
      s = undefined;
      this.servers.delete(server);
    }
    if (this.bytes + answer.bytes - (s?.answers.get(k)?.bytes ?? 0) > MAX_DESCRIBED_BYTES || (!s && this.servers.size >= MAX_DESCRIBED_SERVERS)) {
      this.servers.clear();
      this.bytes = 0;
      s = undefined;
    }
    if (!s) this.servers.set(server, (s = { version, answers: new Map() }));
    this.bytes += answer.bytes - (s.answers.get(k)?.bytes ?? 0);
    s.answers.set(k, answer);
  }
}

/** A detail level alone (a server's answer), or with the tool's name after a NUL (a level has none). */
function key(detail: Detail, tool: string | undefined): string {
  return tool === undefined ? detail : `${detail}\u0000${tool}`;
}
