// SecretWatch (the tokens Secret, upstream credentials) against the real API server: a Secret that
// does not change ends the watch at every inactivity timeout, which is its ordinary life and not a
// fault, so it is followed on quietly (debug, no warning), and changes keep arriving after it.
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SecretWatch } from '../../src/auth/secret-watch.js';
import { createNamespace, deleteNamespace, testKube, until } from './helpers/kube.js';

const k = testKube();
let ns = '';

beforeAll(async () => {
  ns = await createNamespace(k, 'secret-watch');
});
afterAll(async () => {
  if (ns) await deleteNamespace(k, ns);
});

interface Line {
  level: number;
  msg: string;
}

describe('SecretWatch', () => {
  it('follows a quiet Secret through inactivity timeouts without a warning, and still sees its changes and deletion', async () => {
    await k.core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'quiet' }, stringData: { v: 'one' } } });
    const lines: Line[] = [];
    const log = pino({ level: 'debug' }, { write: (l: string) => void lines.push(JSON.parse(l) as Line) });
    const seen: (string | undefined)[] = [];
    const watch = new SecretWatch(
      k.kc,
      k.core,
      ns,
      'quiet',
      (s) => seen.push(s?.data?.v === undefined ? undefined : Buffer.from(s.data.v, 'base64').toString()),
      log,
      { inactivityTimeoutMs: 500 },
    );
    try {
      await watch.start();
      expect(seen).toEqual(['one']);
      const ends = (): number => lines.filter((l) => l.msg.includes('ended; watching again')).length;
      // Three inactivity timeouts of a Secret nobody touches.
      await until(() => ends() >= 3, 20_000, 'three ends of the quiet watch');
      expect(lines.filter((l) => l.level >= 40)).toEqual([]);
      expect(lines.filter((l) => l.msg.includes('ended; watching again')).every((l) => l.level === 20)).toBe(true);

      await k.core.replaceNamespacedSecret({ namespace: ns, name: 'quiet', body: { metadata: { name: 'quiet' }, stringData: { v: 'two' } } });
      await until(() => seen.at(-1) === 'two', 20_000, 'the change after the timeouts');
      await k.core.deleteNamespacedSecret({ namespace: ns, name: 'quiet' });
      await until(() => seen.at(-1) === undefined, 20_000, 'the deletion');
      expect(lines.filter((l) => l.level >= 40)).toEqual([]);
    } finally {
      await watch.stop();
    }
  });

  it('warns when the Secret cannot be read, and keeps trying', async () => {
    const lines: Line[] = [];
    const log = pino({ level: 'debug' }, { write: (l: string) => void lines.push(JSON.parse(l) as Line) });
    const errors: unknown[] = [];
    // An API server that cannot be reached: the same credentials, a port nothing listens on.
    const kc = new KubeConfig();
    kc.loadFromString(k.kc.exportConfig());
    const cluster = kc.getCurrentCluster()!;
    kc.clusters = kc.clusters.map((c) => (c.name === cluster.name ? { ...c, server: 'https://127.0.0.1:1' } : c));
    const watch = new SecretWatch(kc, kc.makeApiClient(CoreV1Api), ns, 'quiet', () => undefined, log, { onError: (e) => errors.push(e) });
    try {
      await watch.start();
      await until(() => lines.some((l) => l.level === 40 && l.msg.includes('failed; trying again')), 10_000, 'the warning');
      expect(errors.length).toBeGreaterThan(0);
    } finally {
      await watch.stop();
    }
  });
});
