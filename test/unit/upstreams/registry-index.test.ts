// The registry's search index: the watcher sets every server on each reconcile (status writes,
// refreshes of any upstream), so the index is rebuilt only when a catalog really changed, and it
// holds at most MAX_INDEXED_CHARS of each tool's text. Builds are counted, not timed.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ToolFilter } from '../../../src/upstreams/policy.js';
import {
  INDEX_BURST_CHARS,
  INDEX_CHARS_PER_SECOND,
  MAX_INDEXES,
  USER_SEARCH_BURST_MS,
  USER_SEARCH_MS_PER_SECOND,
  Upstreams,
  type UpstreamEntry,
} from '../../../src/upstreams/registry.js';
import { ToolSearch } from '../../../src/upstreams/search.js';
import type * as SearchModule from '../../../src/upstreams/search.js';
import type { UpstreamTool } from '../../../src/upstreams/types.js';

const builds = vi.hoisted(() => ({ n: 0, clock: undefined as { t: number } | undefined, ms: 0 }));

vi.mock('../../../src/upstreams/search.js', async (importOriginal) => {
  const m = await importOriginal<typeof SearchModule>();
  class CountedToolSearch extends m.ToolSearch {
    constructor(tools: Iterable<UpstreamTool>) {
      super(tools);
      builds.n++;
      // A build's time on the registry's clock, where a test gives one.
      if (builds.clock) builds.clock.t += builds.ms;
    }
  }
  return { ...m, ToolSearch: CountedToolSearch };
});

const tool = (server: string, name: string, description = `${name.replace(/_/g, ' ')} things`): UpstreamTool => ({
  server,
  name,
  description,
  inputSchema: { type: 'object', properties: { id: { type: 'string' } } },
});

function entry(name: string, over: Partial<UpstreamEntry> = {}): UpstreamEntry {
  return {
    name,
    access: undefined,
    filter: new ToolFilter({}),
    callTimeoutMs: 60_000,
    ready: true,
    reason: 'CatalogLoaded',
    tools: [tool(name, 'create_issue'), tool(name, 'list_labels')],
    ...over,
  };
}

const names = (r: Upstreams, query: string) => r.search(undefined, query, { limit: 50 }).map((h) => `${h.server}.${h.name}`);

describe('the registry’s search index', () => {
  it('is built again only when a catalog, a readiness or a server changed', () => {
    const r = new Upstreams();
    r.set(entry('github'));
    r.set(entry('jira'));
    builds.n = 0;
    const steps: Array<[string, () => void, number, string[]]> = [
      ['first search', () => undefined, 1, ['github.create_issue', 'jira.create_issue']],
      [
        'the same arrays again',
        () => (r.set(entry('github', { tools: r.catalog(undefined, 'github') })), r.set(entry('jira', { tools: r.catalog(undefined, 'jira') }))),
        1,
        ['github.create_issue', 'jira.create_issue'],
      ],
      // The caller now sees other servers: an index of its own (none scores what it may not use).
      [
        'equal copies, new status, new access',
        () => r.set(entry('jira', { reason: 'Refreshed', message: 'x', access: { users: ['someone'] } })),
        2,
        ['github.create_issue'],
      ],
      ['access back (an equal copy): the first index again', () => r.set(entry('jira')), 2, ['github.create_issue', 'jira.create_issue']],
      [
        'a description changed',
        () => r.set(entry('jira', { tools: [tool('jira', 'create_issue', 'make a ticket'), tool('jira', 'list_labels')] })),
        3,
        ['github.create_issue', 'jira.create_issue'],
      ],
      [
        'a tool added',
        () => r.set(entry('github', { tools: [...entry('github').tools, tool('github', 'close_issue')] })),
        4,
        ['github.close_issue', 'github.create_issue', 'jira.create_issue'],
      ],
      ['not ready', () => r.set(entry('github', { ready: false, reason: 'Unreachable', tools: [] })), 5, ['jira.create_issue']],
      ['still not ready (a new empty array)', () => r.set(entry('github', { ready: false, reason: 'Unreachable', tools: [] })), 5, ['jira.create_issue']],
      ['ready again', () => r.set(entry('github')), 6, ['github.create_issue', 'jira.create_issue']],
      ['a server deleted', () => r.delete('jira'), 7, ['github.create_issue']],
    ];
    for (const [step, change, expected, hits] of steps) {
      change();
      for (let i = 0; i < 3; i++) expect(names(r, 'issue').sort(), step).toEqual(hits);
      expect(builds.n, step).toBe(expected);
    }
  });

  it('keeps a catalog’s version and array while set() brings equal ones', () => {
    const r = new Upstreams();
    r.set(entry('github'));
    const held = r.catalog(undefined, 'github');
    const version = r.catalogVersion(undefined, 'github');
    r.set(entry('github', { reason: 'Refreshed' }));
    expect(r.catalog(undefined, 'github')).toBe(held);
    expect(r.catalogVersion(undefined, 'github')).toBe(version);
    r.set(entry('github', { tools: [tool('github', 'create_issue', 'other'), tool('github', 'list_labels')] }));
    expect(r.catalogVersion(undefined, 'github')).not.toBe(version);
    expect(r.catalog(undefined, 'github')).not.toBe(held);
    r.set(entry('locked', { access: { users: ['alice'] } }));
    expect(() => r.catalogVersion({ user: 'bob' }, 'locked')).toThrow(/no upstream server "locked"/);
  });

  it('indexes at most 1 KiB of a tool’s name, title and description (sanitize keeps 8 KiB descriptions)', () => {
    const filler = 'lorem ipsum dolor sit amet '.repeat(300); // 8,100 characters
    const r = new Upstreams();
    r.set(
      entry('docs', {
        tools: [
          { ...tool('docs', 'read_page', `quokka pages. ${filler} zebulon`), title: `${'Title words '.repeat(100)}wombat` },
          tool('docs', 'write_page', `numbat ${'x'.repeat(990)} platypus`),
        ],
      }),
    );
    expect(names(r, 'quokka')).toEqual(['docs.read_page']);
    expect(names(r, 'platypus')).toEqual(['docs.write_page']);
    expect(names(r, 'zebulon')).toEqual([]);
    expect(names(r, 'wombat')).toEqual([]);
  });

  it('is built from at most INDEX_CHARS_PER_SECOND characters a second: meanwhile the last one answers, without what is gone', () => {
    let now = 0;
    const r = new Upstreams(undefined, undefined, () => now);
    // 2,000 tools of 1 KiB each: one build takes more than half the burst.
    const filler = 'lorem '.repeat(200);
    const big = (extra: string): UpstreamTool[] => [tool('churn', extra), ...Array.from({ length: 1_999 }, (_, i) => tool('churn', `tool_${i}`, filler))];
    expect(2_000 * 1024).toBeGreaterThan(INDEX_BURST_CHARS / 2);
    r.set(entry('churn', { tools: big('quokka_first') }));
    r.set(entry('steady'));
    builds.n = 0;
    expect(names(r, 'quokka')).toEqual(['churn.quokka_first']);
    expect(builds.n).toBe(1);

    r.set(entry('churn', { tools: big('quokka_second') }));
    for (let i = 0; i < 3; i++) expect(names(r, 'quokka')).toEqual([]);
    expect(names(r, 'create issue')).toEqual(['steady.create_issue']);
    expect(builds.n).toBe(1);

    now += Math.ceil((2_000 * 1024 * 1000) / INDEX_CHARS_PER_SECOND);
    expect(names(r, 'quokka')).toEqual(['churn.quokka_second']);
    expect(builds.n).toBe(2);
  });

  it('refuses, saying when to retry, a search over budget whose set of servers has no index to fall back on', () => {
    let now = 0;
    const r = new Upstreams(undefined, undefined, () => now);
    const filler = 'lorem '.repeat(200);
    const big = (extra: string): UpstreamTool[] => [tool('churn', extra), ...Array.from({ length: 1_999 }, (_, i) => tool('churn', `tool_${i}`, filler))];
    r.set(entry('churn', { tools: big('quokka_first') }));
    expect(names(r, 'quokka')).toEqual(['churn.quokka_first']);
    r.set(entry('churn', { tools: big('quokka_second') }));
    expect(names(r, 'quokka')).toEqual([]); // over budget: the last index, without what is gone
    // A server only carol may use: her set of servers has no index yet, and none stale.
    r.set(entry('carols', { access: { users: ['carol'] } }));
    expect(() => r.search({ user: 'carol' }, 'issue')).toThrow(/rebuilding its tool search after catalog changes\. Retry in \d+ s/);
    expect(names(r, 'lorem').length).toBeGreaterThan(0); // the others' last index still answers
    now += Math.ceil((INDEX_BURST_CHARS * 1000) / INDEX_CHARS_PER_SECOND);
    expect(r.search({ user: 'carol' }, 'issue').map((h) => `${h.server}.${h.name}`)).toEqual(['carols.create_issue']);
  });

  it('builds an index larger than the burst once the budget is full again', () => {
    let now = 0;
    const r = new Upstreams(undefined, undefined, () => now);
    const filler = 'lorem '.repeat(200);
    const huge = (extra: string): UpstreamTool[] => [tool('huge', extra), ...Array.from({ length: 4_999 }, (_, i) => tool('huge', `tool_${i}`, filler))];
    expect(5_000 * 1024).toBeGreaterThan(INDEX_BURST_CHARS);
    r.set(entry('huge', { tools: huge('quokka_first') }));
    builds.n = 0;
    expect(names(r, 'quokka')).toEqual(['huge.quokka_first']);
    r.set(entry('huge', { tools: huge('quokka_second') }));
    now += Math.ceil((INDEX_BURST_CHARS * 1000) / INDEX_CHARS_PER_SECOND);
    expect(names(r, 'quokka')).toEqual([]);
    expect(builds.n).toBe(1);
    now += Math.ceil((5_000 * 1024 * 1000) / INDEX_CHARS_PER_SECOND);
    expect(names(r, 'quokka')).toEqual(['huge.quokka_second']);
    expect(builds.n).toBe(2);
  });
});

// One user's searches take at most their share of the gateway's thread, whether they come from
// search_tools or from sandbox code, and from however many runs: a search's time is what the
// registry's clock moved while it ran (here, a fixed cost the test's clock adds).
describe('a user’s searches', () => {
  afterEach(() => void vi.restoreAllMocks());
  const COST_MS = 40;
  function timed(): { r: Upstreams; clock: { t: number } } {
    const clock = { t: 0 };
    const r = new Upstreams(undefined, undefined, () => clock.t);
    r.set(entry('github'));
    // Every query moves the clock by COST_MS; building the index moves it by 5 s.
    const search = ToolSearch.prototype.search;
    vi.spyOn(ToolSearch.prototype, 'search').mockImplementation(function (this: ToolSearch, ...args) {
      clock.t += COST_MS;
      return search.apply(this, args);
    });
    return { r, clock };
  }
  const bob = { user: 'bob' };
  const alice = { user: 'alice' };
  const outcome = (r: Upstreams, caller: { user: string }): string => {
    try {
      r.search(caller, 'create issue');
      return 'ok';
    } catch (err) {
      return (err as { code?: string }).code ?? String(err);
    }
  };

  it('are answered while their time fits the burst, then refused until repaid, for that user only', () => {
    const { r, clock } = timed();
    // Time passes as they run (the budget refills meanwhile); the last one starts owing nothing.
    const fit = Math.floor(USER_SEARCH_BURST_MS / (COST_MS - (COST_MS * USER_SEARCH_MS_PER_SECOND) / 1000)) + 1;
    const answers = Array.from({ length: fit + 3 }, () => outcome(r, bob));
    expect(answers.filter((a) => a === 'ok')).toHaveLength(fit);
    expect(answers.slice(fit)).toEqual(['search_limit', 'search_limit', 'search_limit']);
    expect(() => r.search(bob, 'x')).toThrow(/Your searches took more than 100 ms of the gateway's time a second \(after 1000 ms\)\. Retry in 1 s/);
    // Another user is not charged for bob's.
    expect(outcome(r, alice)).toBe('ok');
    // Repaid at USER_SEARCH_MS_PER_SECOND: bob's debt of one search, then one more.
    clock.t += ((2 * COST_MS) / USER_SEARCH_MS_PER_SECOND) * 1000;
    expect(outcome(r, bob)).toBe('ok');
  });

  it('are not charged for building the index, which is everyone’s work', () => {
    const { r, clock } = timed();
    builds.clock = clock;
    builds.ms = 5 * USER_SEARCH_BURST_MS;
    try {
      const before = builds.n;
      // Each search after a catalog change builds the index (5 s on the clock); bob's searches stay answered.
      for (let i = 0; i < 3; i++) {
        r.set(entry('churn', { tools: [tool('churn', `quokka_${String(i)}`)] }));
        clock.t += (INDEX_BURST_CHARS * 1000) / INDEX_CHARS_PER_SECOND; // the index budget full again
        expect(outcome(r, bob)).toBe('ok');
      }
      expect(builds.n - before).toBe(3);
      expect(outcome(r, bob)).toBe('ok');
    } finally {
      builds.clock = undefined;
    }
  });
});

// What a caller's search scores (a term's rarity, a field's length) comes from the servers it may
// use only: a server hidden from it changes neither its hits nor their scores.
describe('a search’s scores', () => {
  const bob = { user: 'bob' };
  const mail = (): UpstreamEntry => entry('mail', { tools: [tool('mail', 'send_message', 'send an email message to a person'), tool('mail', 'list_folders')] });
  const payroll = (tools: UpstreamTool[]): UpstreamEntry => entry('payroll', { access: { users: ['alice'] }, tools });
  const scores = (hidden: UpstreamTool[] | undefined): Array<[string, number]> => {
    const r = new Upstreams();
    r.set(mail());
    if (hidden) r.set(payroll(hidden));
    return r.search(bob, 'send message to person', { limit: 10 }).map((h) => [`${h.server}.${h.name}`, h.score]);
  };

  it('do not depend on a server the caller may not use', () => {
    const alone = scores(undefined);
    expect(alone.map(([n]) => n)).toContain('mail.send_message');
    expect(scores([tool('payroll', 'pay_person', 'send a payment message to a person')])).toEqual(alone);
    expect(scores(Array.from({ length: 50 }, (_, i) => tool('payroll', `run_${String(i)}`, 'message person send')))).toEqual(alone);
  });

  it('come from one index per set of servers, at most MAX_INDEXES kept', () => {
    const r = new Upstreams();
    r.set(mail());
    r.set(payroll([tool('payroll', 'pay_person')]));
    builds.n = 0;
    r.search(bob, 'send');
    r.search({ user: 'alice' }, 'send');
    r.search(bob, 'send');
    r.search({ user: 'alice' }, 'pay');
    expect(builds.n).toBe(2);
    // More sets than kept: each server visible to one user alone.
    for (let i = 0; i < MAX_INDEXES + 2; i++) r.set(entry(`own${String(i)}`, { access: { users: [`u${String(i)}`] } }));
    builds.n = 0;
    for (let i = 0; i < MAX_INDEXES + 2; i++) r.search({ user: `u${String(i)}` }, 'issue');
    expect(builds.n).toBe(MAX_INDEXES + 2);
    // The last MAX_INDEXES are kept; the first ones are built again.
    r.search({ user: `u${String(MAX_INDEXES + 1)}` }, 'issue');
    expect(builds.n).toBe(MAX_INDEXES + 2);
    r.search({ user: 'u0' }, 'issue');
    expect(builds.n).toBe(MAX_INDEXES + 3);
  });
});
