import { describe, expect, it } from 'vitest';
import { MAX_CALL_FRAME_BYTES, parseCallFrame } from '../../../src/codemode/frames.js';

const head = { id: '7', type: 'call', callId: 'k1' };

describe('parseCallFrame', () => {
  it.each([
    ['a tool call', { ...head, op: 'call', server: 'github', tool: 'create_issue', args: { title: 'x' } }],
    ['a call without args (defaults to {})', { ...head, op: 'call', server: 'everything', tool: 'get-sum' }],
    ['a tool name with dots and slashes', { ...head, op: 'call', server: 'a1', tool: 'ns.sub/tool-x_1', args: {} }],
    ['servers', { ...head, op: 'servers' }],
    ['search', { ...head, op: 'search', query: 'create issue', limit: 5, detail: 'name' }],
    ['describe a server', { ...head, op: 'describe', server: 'github' }],
    ['describe a tool', { ...head, op: 'describe', server: 'github', tool: 'create_issue', detail: 'summary' }],
  ])('accepts %s', (_name, frame) => {
    expect(parseCallFrame(frame, 100)).toMatchObject({ ok: true });
  });

  it.each([
    ['an unknown op', { ...head, op: 'delete' }, 'k1', /op/],
    ['a server name with capitals', { ...head, op: 'call', server: 'GitHub', tool: 't' }, 'k1', /server must be/],
    ['a tool name with spaces', { ...head, op: 'call', server: 'gh', tool: 'a b' }, 'k1', /tool must be/],
    ['args that are a list', { ...head, op: 'call', server: 'gh', tool: 't', args: [1] }, 'k1', /args must be an object/],
    ['args that are null', { ...head, op: 'call', server: 'gh', tool: 't', args: null }, 'k1', /args must be an object/],
    ['args that are a string', { ...head, op: 'call', server: 'gh', tool: 't', args: '{}' }, 'k1', /args must be an object/],
    ['a search limit above 50', { ...head, op: 'search', query: 'x', limit: 500 }, 'k1', /limit/],
    ['an empty query', { ...head, op: 'search', query: '' }, 'k1', /query/],
    ['an unknown detail', { ...head, op: 'describe', server: 'gh', detail: 'all' }, 'k1', /detail/],
    ['a callId with a space (unanswerable)', { ...head, callId: 'a b', op: 'servers' }, undefined, /callId/],
    ['a callId of 65 characters (unanswerable)', { ...head, callId: 'x'.repeat(65), op: 'servers' }, undefined, /callId/],
    ['a numeric id (unanswerable)', { ...head, id: 7, op: 'servers' }, 'k1', /id/],
  ])('refuses %s, answerable only with a valid callId', (_name, frame, callId, why) => {
    const r = parseCallFrame(frame, 100);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.callId).toBe(callId);
    expect(r.why).toMatch(why);
  });

  it('passes the arguments on as parsed, without walking or copying them (the sandbox picks their size)', () => {
    const args = Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`k${i}`, { v: [i] }]));
    const frame: Record<string, unknown> = { ...head, op: 'call', server: 'gh', tool: 't', args };
    const r = parseCallFrame(frame, 100);
    expect(r).toMatchObject({ ok: true });
    if (r.ok && r.frame.op === 'call') expect(r.frame.args).toBe(args);
    else expect.unreachable('a call frame');
  });

  it('gives each call without args an object of its own', () => {
    const frame: Record<string, unknown> = { ...head, op: 'call', server: 'gh', tool: 't' };
    const a = parseCallFrame(frame, 100);
    const b = parseCallFrame(frame, 100);
    if (!a.ok || a.frame.op !== 'call' || !b.ok || b.frame.op !== 'call') return expect.unreachable('call frames');
    expect(a.frame.args).toEqual({});
    expect(a.frame.args).not.toBe(b.frame.args);
  });

  it('refuses a frame above the size bound before looking at it', () => {
    const r = parseCallFrame({ ...head, op: 'servers' } as Record<string, unknown>, MAX_CALL_FRAME_BYTES + 1);
    expect(r).toMatchObject({ ok: false, id: '7', callId: 'k1' });
  });
});
