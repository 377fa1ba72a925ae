import { describe, expect, it } from 'vitest';
import { tearDown } from '../e2e/faults/helpers/teardown.js';

describe('tearDown (fault tests)', () => {
  it.each([
    ['a step that throws', () => Promise.reject(new Error('client gone'))],
    [
      'a step that throws at once',
      () => {
        throw new Error('not started');
      },
    ],
    ['a step that never ends', () => new Promise(() => undefined)],
    ['a step with nothing to do', () => undefined],
  ])('runs the steps after %s', async (_, step) => {
    const ran: string[] = [];
    await tearDown([() => ran.push('first'), step, () => ran.push('delete the namespace')], 50);
    expect(ran).toEqual(['first', 'delete the namespace']);
  });

  it('runs the steps in order, each after the one before has ended', async () => {
    const ran: string[] = [];
    await tearDown(
      [
        async () => {
          await new Promise((r) => setTimeout(r, 20));
          ran.push('slow');
        },
        () => ran.push('next'),
      ],
      1000,
    );
    expect(ran).toEqual(['slow', 'next']);
  });
});
