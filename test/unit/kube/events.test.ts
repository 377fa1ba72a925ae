// Events of one object and reason are rate-limited (src/kube/events.ts): a burst, then one per 5
// minutes, per object and reason, with a bounded number of budgets kept.
import type { EventsV1Api } from '@kubernetes/client-node';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { EVENT_BURST, EVENT_REFILL_MS, EventBudgets, EventRecorder, MAX_EVENT_KEYS } from '../../../src/kube/events.js';

describe('EventBudgets', () => {
  // Steps of [ms since the start, Events asked for] for one key; the Events let through, in all.
  it.each<[string, Array<[number, number]>, number]>([
    ['a burst passes', [[0, EVENT_BURST]], EVENT_BURST],
    ['past the burst, none', [[0, EVENT_BURST + 10]], EVENT_BURST],
    [
      'one more per refill period',
      [
        [0, EVENT_BURST + 1],
        [EVENT_REFILL_MS - 1, 1],
        [EVENT_REFILL_MS, 2],
      ],
      EVENT_BURST + 1,
    ],
    [
      'refilled to the burst, no further',
      [
        [0, EVENT_BURST],
        [100 * EVENT_REFILL_MS, EVENT_BURST + 5],
      ],
      2 * EVENT_BURST,
    ],
  ])('%s', (_name, steps, passed) => {
    let t = 0;
    const b = new EventBudgets(() => t);
    let n = 0;
    for (const [at, asked] of steps) {
      t = at;
      for (let i = 0; i < asked; i++) if (b.take('k')) n++;
    }
    expect(n).toBe(passed);
  });

  it('keeps at most MAX_EVENT_KEYS budgets, forgetting the least recently used', () => {
    const b = new EventBudgets(() => 0);
    for (let i = 0; i < EVENT_BURST; i++) b.take('spent');
    expect(b.take('spent')).toBe(false);
    for (let i = 0; i < MAX_EVENT_KEYS; i++) b.take(`other-${String(i)}`);
    expect(b.size).toBe(MAX_EVENT_KEYS);
    // Forgotten: a full burst again.
    expect(b.take('spent')).toBe(true);
  });
});

describe('EventRecorder', () => {
  function recorder(): { rec: EventRecorder; sent: Array<{ reason: string; name: string }>; now: { t: number } } {
    const sent: Array<{ reason: string; name: string }> = [];
    const api = {
      createNamespacedEvent: ({ body }: { body: { reason: string; regarding: { name: string } } }) => {
        sent.push({ reason: body.reason, name: body.regarding.name });
        return Promise.resolve({});
      },
    } as unknown as EventsV1Api;
    const now = { t: 0 };
    return { rec: new EventRecorder(api, 'gw-0', pino({ level: 'silent' }), () => now.t), sent, now };
  }

  it('limits Events of one object and reason, not of other reasons or objects', () => {
    const { rec, sent, now } = recorder();
    const session = { name: 's1', namespace: 'ns', uid: 'u1', kind: 'SandboxSession' };
    // 1,000 session calls, each with a refused tool call.
    for (let i = 0; i < 1000; i++) rec.record(session, 'Warning', 'ToolCallDenied', 'CallTool', 'Refused a tool call');
    rec.record(session, 'Warning', 'Failed', 'Complete', 'The code failed');
    rec.record({ ...session, name: 's2', uid: 'u2' }, 'Warning', 'ToolCallDenied', 'CallTool', 'Refused a tool call');
    now.t = EVENT_REFILL_MS;
    rec.record(session, 'Warning', 'ToolCallDenied', 'CallTool', 'Refused a tool call');
    expect(sent.filter((e) => e.name === 's1' && e.reason === 'ToolCallDenied')).toHaveLength(EVENT_BURST + 1);
    expect(sent.filter((e) => e.reason === 'Failed')).toHaveLength(1);
    expect(sent.filter((e) => e.name === 's2')).toHaveLength(1);
  });
});
