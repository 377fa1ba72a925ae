import { describe, expect, it } from 'vitest';
import { MAX_QUERY_TERMS, ToolSearch, queryTerms, tokenize } from '../../../src/upstreams/search.js';
import type { UpstreamTool } from '../../../src/upstreams/types.js';

describe('tokenize', () => {
  it.each([
    ['create_issue', ['create', 'issue']],
    ['get-tiny-image', ['get', 'tiny', 'image']],
    ['listPullRequests', ['list', 'Pull', 'Requests']],
    ['HTTPRequest', ['HTTP', 'Request']],
    ['Echo a message.', ['Echo', 'a', 'message']],
  ])('%s', (text, expected) => {
    expect(tokenize(text)).toEqual(expected);
  });
});

describe('queryTerms (queries come from sandbox code)', () => {
  const many = Array.from({ length: 166 }, (_, i) => `word${i}`).join(' ');
  it.each<[string, string, string[]]>([
    ['keeps meaningful words, lower-cased', 'Create an Issue', ['create', 'issue']],
    ['drops repeats', 'issue issue Issue', ['issue']],
    ['splits names', 'listPullRequests', ['list', 'pull', 'requests']],
    ['stop words only', 'the a of', []],
    [`keeps the first ${MAX_QUERY_TERMS} distinct words of a long query`, many, Array.from({ length: MAX_QUERY_TERMS }, (_, i) => `word${i}`)],
  ])('%s', (_what, query, expected) => {
    expect(queryTerms(query)).toEqual(expected);
  });
});

const tool = (server: string, name: string, description: string): UpstreamTool => ({ server, name, description, inputSchema: { type: 'object' } });
const catalog = [
  tool('everything', 'echo', 'Echoes back the input string'),
  tool('everything', 'get-sum', 'Returns the sum of two numbers'),
  tool('everything', 'get-tiny-image', 'Returns a tiny MCP logo image'),
  tool('everything', 'trigger-long-running-operation', 'Demonstrates a long running operation with progress updates'),
  tool('github', 'create_issue', 'Create a new issue in a GitHub repository'),
  tool('github', 'list_issues', 'List issues in a GitHub repository with filters'),
  tool('github', 'get_issue', 'Get the details of one issue'),
  tool('github', 'create_pull_request', 'Open a pull request'),
  tool('jira', 'create_ticket', 'Create a Jira issue (ticket) in a project'),
];
const all = new Set(['everything', 'github', 'jira']);

describe('ToolSearch ranking', () => {
  const index = new ToolSearch(catalog);

  it.each<[string, string]>([
    ['echo a message', 'everything.echo'],
    ['add two numbers', 'everything.get-sum'],
    ['create an issue', 'github.create_issue'],
    ['list issues', 'github.list_issues'],
    ['pull request', 'github.create_pull_request'],
    ['image', 'everything.get-tiny-image'],
    ['progress', 'everything.trigger-long-running-operation'],
    ['ticket', 'jira.create_ticket'],
    ['issus', 'github.list_issues'],
  ])('%s → %s first', (query, expected) => {
    const [first] = index.search(query, all);
    expect(`${first?.server}.${first?.name}`).toBe(expected);
  });

  it('searches only the given servers', () => {
    expect(index.search('create issue', new Set(['jira'])).map((h) => h.server)).toEqual(['jira']);
    expect(index.search('create issue', new Set())).toEqual([]);
  });

  it('bounds the results and orders equal queries equally', () => {
    expect(index.search('issue', all, 2)).toHaveLength(2);
    expect(index.search('issue', all)).toEqual(index.search('issue', all));
  });

  it('lists tools by name for an empty query', () => {
    expect(index.search('  ', new Set(['github']), 2).map((h) => h.name)).toEqual(['create_issue', 'create_pull_request']);
  });

  it('answers a query of many words from its first terms, matched exactly and by prefix', () => {
    const padded = `create issue ${Array.from({ length: 200 }, (_, i) => `zzzz${i}`).join(' ')}`;
    expect(index.search(padded, all)[0]?.name).toBe('create_issue');
    // Past four terms there is no fuzzy matching: a misspelling no longer finds its tool.
    expect(index.search('issus', all)[0]?.name).toBe('list_issues');
    expect(index.search('issus qqqq wwww eeee rrrr', all)).toEqual([]);
  });

  it('returns signatures, not schemas', () => {
    const [hit] = index.search('echo', all);
    expect(hit).toEqual({ server: 'everything', name: 'echo', summary: 'Echoes back the input string', signature: '()', score: expect.any(Number) });
  });
});
