import { describe, expect, it } from 'vitest';
import { generateRunName, podNameForRun, runLabelValue } from '../../src/sandbox/names.js';

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const LABEL_VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/;
const long = 'a'.repeat(100);
const limit = 'b'.repeat(59); // sbr- + 59 = 63

describe('podNameForRun', () => {
  it.each<[string, string]>([
    ['run-abc123', 'sbr-run-abc123'],
    [limit, `sbr-${limit}`],
  ])('%s → %s (short names are kept readable)', (run, pod) => {
    expect(podNameForRun(run)).toBe(pod);
  });

  it.each([long, `${limit}b`, 'run.with.dots', 'Upper', `x${'-'.repeat(70)}y`, 'a-'.repeat(60)])('%s → a valid DNS-1123 label ending in a hash', (run) => {
    const pod = podNameForRun(run);
    expect(pod.length).toBeLessThanOrEqual(63);
    expect(pod).toMatch(DNS_LABEL);
    expect(pod).toMatch(/^sbr-.*-[0-9a-f]{8}$/);
  });

  it('is deterministic and keeps distinct runs distinct', () => {
    expect(podNameForRun(long)).toBe(podNameForRun(long));
    expect(podNameForRun(`${long}1`)).not.toBe(podNameForRun(`${long}2`));
    expect(podNameForRun('a.b')).not.toBe(podNameForRun('a-b'));
  });
});

describe('runLabelValue', () => {
  it.each<[string, boolean]>([
    ['run-abc', true],
    ['run.with.dots', true],
    ['c'.repeat(63), true],
    ['c'.repeat(64), false],
    [long, false],
  ])('%s kept as is: %s', (run, kept) => {
    const value = runLabelValue(run);
    expect(value === run).toBe(kept);
    expect(value.length).toBeLessThanOrEqual(63);
    expect(value).toMatch(LABEL_VALUE);
  });
});

describe('generateRunName', () => {
  it('is run- plus 10 lowercase base36 characters, usable as a pod name', () => {
    for (let i = 0; i < 200; i++) {
      const name = generateRunName();
      expect(name).toMatch(/^run-[0-9a-z]{10}$/);
      expect(podNameForRun(name)).toBe(`sbr-${name}`);
    }
  });

  it('does not repeat', () => {
    const names = new Set(Array.from({ length: 1000 }, () => generateRunName()));
    expect(names.size).toBe(1000);
  });
});
