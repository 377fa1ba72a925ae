// describe(server) answers, measured and cut once per catalog version and detail level and shared
// by the runs of the process. A run may ask 1,000 times; measuring and cutting an 11.6 MB catalog
// took up to 283 ms each time, and 105 s of one run. An answer depends on the server, its
// catalog's version (equal only for equal catalogs, whoever asks: UpstreamCaller.catalogVersion),
// the detail level and the cut limit (the broker's own, fixed): the key. The broker checks the
// run may use the server before it looks here.
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

export class DescribedCatalogs {
  /** Per server, the answers for one version: a new version replaces them. */
  private readonly servers = new Map<string, { version: string; answers: Map<Detail, Prepared> }>();

  get(server: string, version: string, detail: Detail): Prepared | undefined {
    const s = this.servers.get(server);
    return s?.version === version ? s.answers.get(detail) : undefined;
  }

  set(server: string, version: string, detail: Detail, answer: Prepared): void {
    let s = this.servers.get(server);
    if (s?.version !== version) {
      if (!s && this.servers.size >= MAX_DESCRIBED_SERVERS) this.servers.clear();
      s = { version, answers: new Map() };
      this.servers.set(server, s);
    }
    s.answers.set(detail, answer);
  }
}
