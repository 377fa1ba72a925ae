import { describe, expect, it } from 'vitest';
import { ToolFilter, globToRegExp, mayUse } from '../../../src/upstreams/policy.js';

describe('globToRegExp', () => {
  it.each([
    ['echo', 'echo', true],
    ['echo', 'echo2', false],
    ['get_*', 'get_issue', true],
    ['get_*', 'get_', true],
    ['get_*', 'list_get_x', false],
    ['*_issue', 'create_issue', true],
    ['?et', 'get', true],
    ['?et', 'gget', false],
    ['a.b', 'a.b', true],
    ['a.b', 'axb', false],
    ['(x)+', '(x)+', true],
    ['*', 'anything at all', true],
  ])('%s matches %s: %s', (glob, name, expected) => {
    expect(globToRegExp(glob).test(name)).toBe(expected);
  });
});

describe('ToolFilter', () => {
  it.each<[string, { allow?: string[]; deny?: string[] } | undefined, string, boolean]>([
    ['no lists: everything', undefined, 'delete_repo', true],
    ['allow list: only matches', { allow: ['get_*', 'list_*'] }, 'get_issue', true],
    ['allow list: others out', { allow: ['get_*', 'list_*'] }, 'delete_repo', false],
    ['deny list', { deny: ['delete_*'] }, 'delete_repo', false],
    ['deny wins over allow', { allow: ['*'], deny: ['delete_*'] }, 'delete_repo', false],
    ['empty allow = all', { allow: [], deny: ['x'] }, 'y', true],
  ])('%s', (_name, tools, tool, expected) => {
    expect(new ToolFilter(tools).allows(tool)).toBe(expected);
  });
});

describe('mayUse', () => {
  it.each<[string, { users?: string[]; groups?: string[] } | undefined, { user: string; groups?: string[] } | undefined, boolean]>([
    ['no access list: everyone', undefined, { user: 'bob' }, true],
    ['empty lists: everyone', { users: [], groups: [] }, { user: 'bob' }, true],
    ['listed user', { users: ['alice'] }, { user: 'alice' }, true],
    ['unlisted user', { users: ['alice'] }, { user: 'bob' }, false],
    ['member of a listed group', { groups: ['dev'] }, { user: 'bob', groups: ['ops', 'dev'] }, true],
    ['member of another group', { groups: ['dev'] }, { user: 'bob', groups: ['ops'] }, false],
    ['unknown caller, restricted server', { users: ['alice'] }, undefined, false],
    ['unknown caller, open server', undefined, undefined, true],
  ])('%s', (_name, access, caller, expected) => {
    expect(mayUse(access, caller)).toBe(expected);
  });
});
