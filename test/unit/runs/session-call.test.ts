import { describe, expect, it } from 'vitest';
import type { Language, SessionLanguage } from '../../../src/api/v1alpha1/index.js';
import { languageProblem } from '../../../src/runs/session-call.js';

describe('languageProblem (one rule for execute_code and SandboxRun.spec.session)', () => {
  it.each<[SessionLanguage, Language | undefined, boolean]>([
    ['python', undefined, true],
    ['bash', undefined, true],
    ['python', 'python', true],
    ['bash', 'bash', true],
    ['bash', 'sh', true],
    ['node', 'javascript', true],
    ['javascript', 'node', true],
    ['bash', 'python', false],
    ['python', 'bash', false],
    ['python', 'sh', false],
    ['node', 'python', false],
  ])('a %s session, code in %s: fits=%s', (session, requested, fits) => {
    const problem = languageProblem('s1', session, requested);
    expect(problem === undefined).toBe(fits);
    if (problem) {
      expect(problem.stage).toBe('refused');
      expect(problem.message).toBe(`Session s1 runs ${session}, not ${requested}.`);
    }
  });
});
