import { describe, expect, it } from 'vitest';
import { startingUntil } from '../../../src/sessions/service.js';

describe('startingUntil: how long a call waits for a session still starting', () => {
  it.each([
    ['no packages: the start-up allowance it was given', undefined, 300, 1_000],
    ['an empty package list', [], 300, 1_000],
    ['packages: also the packages allowance (they install before Ready)', ['tabulate'], 300, 301_000],
    ['packages, no packages allowance configured', ['tabulate'], 0, 1_000],
  ])('%s', (_what, packages: string[] | undefined, packagesTimeoutSeconds, expected) => {
    expect(startingUntil(1_000, { spec: { language: 'python', ...(packages && { packages }) } } as never, packagesTimeoutSeconds)).toBe(expected);
  });
});
