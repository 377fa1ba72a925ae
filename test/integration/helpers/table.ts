// One row of a reconcile table, run the same way for every controller: build the world in a fresh
// namespace, start the controller's informers, reconcile the object once and compare the whole
// namespace with the world the row expects, then reconcile again and assert that nothing at all
// was written (level-based and idempotent: same resourceVersions, same world).
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { expect } from 'vitest';
import { GROUP, SANDBOXSESSION_PLURAL, VERSION } from '../../../src/api/v1alpha1/index.js';
import { makeClients, statusOf } from '../../../src/kube/clients.js';
import { randomBytes } from 'node:crypto';
import { deleteNamespace, testKube, until } from '../../e2e/helpers/kube.js';
import type { Rig } from './rig.js';
import { buildWorld, snapshot, versions, type World, type WorldSpec } from './world.js';

export const k = testKube();
export const clients = makeClients(k.kc);

/** Times a row writes into its world, relative to when the row starts (the real clock). */
export interface Clock {
  /** ISO time `seconds` from the row's start (negative: in the past). */
  at(seconds: number): string;
}

export interface Row {
  name: string;
  /** CODEMODE_* settings of the controller for this row. */
  env?: Record<string, string>;
  /** How far the controller's clock is ahead of the real one (seconds). */
  clockAheadSeconds?: number;
  world(clock: Clock): WorldSpec;
  /** Objects created once the controller's informers run (what it sees happen, e.g. a claim). */
  meanwhile?(clock: Clock): WorldSpec;
  /** Name of the object to reconcile. */
  key: string;
  /** The world after one reconcile, from the world before it (normalised: see world.ts). */
  expected(before: World, clock: Clock): World;
  /** Whether the settled object is looked at again later (time-based work left). */
  requeued: boolean;
}

type RigFactory<R extends Rig> = (namespace: string, now: Date, env: Record<string, string> | undefined) => Promise<R>;

export async function runRow<R extends Rig & { controller: { reconcile(key: string): Promise<{ requeueAfterMs?: number } | void> } }>(
  row: Row,
  prefix: string,
  rig: RigFactory<R>,
): Promise<void> {
  const ns = await createNamespace(prefix);
  let r: R | undefined;
  try {
    const start = Date.now();
    const clock: Clock = { at: (s) => new Date(start + s * 1000).toISOString() };
    await buildWorld(clients, ns, row.world(clock));
    r = await rig(ns, new Date(start + (row.clockAheadSeconds ?? 0) * 1000), row.env);
    if (row.meanwhile) await buildWorld(clients, ns, row.meanwhile(clock));
    await r.settle();
    const key = `${ns}/${row.key}`;
    const before = await snapshot(clients, ns);

    await r.controller.reconcile(key);
    await r.settle();
    const after = await snapshot(clients, ns);
    // INTEGRATION_DUMP=1 prints each row's worlds (to write a new row's expectation).
    if (process.env.INTEGRATION_DUMP) console.log(JSON.stringify({ before, after }, null, 1));
    expect(after).toEqual(row.expected(before, clock));

    const written = await versions(clients, ns);
    const again = await r.controller.reconcile(key);
    await r.settle();
    expect(await snapshot(clients, ns)).toEqual(after);
    expect(await versions(clients, ns), 'the second reconcile wrote something').toEqual(written);
    expect(again?.requeueAfterMs !== undefined, `requeueAfterMs: ${again?.requeueAfterMs}`).toBe(row.requeued);
    if (again?.requeueAfterMs !== undefined) expect(again.requeueAfterMs).toBeGreaterThan(0);
  } finally {
    await r?.stop();
    await deleteNamespace(k, ns);
  }
}

/** The world with `key` removed. */
export function without(key: string): (w: World) => World {
  return (w) => {
    const { [key]: _gone, ...rest } = w;
    return rest;
  };
}

/** The world with `changes` applied to the object at `key` (shallow per top-level field). */
export function changed(key: string, change: (obj: Record<string, unknown>) => Record<string, unknown>, extra: World = {}): (w: World) => World {
  return (w) => ({ ...w, [key]: change(w[key] as Record<string, unknown>), ...extra });
}

/**
 * A fresh namespace with its default ServiceAccount (marker pods need one to be admitted) created
 * here rather than awaited from the controller-manager: this layer needs only the API server.
 */
export async function createNamespace(prefix: string): Promise<string> {
  const name = `${prefix}-${randomBytes(3).toString('hex')}`;
  await clients.core.createNamespace({ body: { metadata: { name, labels: { 'codemode.dev/test': 'true' } } } });
  try {
    await clients.core.createNamespacedServiceAccount({ namespace: name, body: { metadata: { name: 'default' } } });
  } catch (err) {
    if (statusOf(err) !== 409) {
      await deleteNamespace(k, name);
      throw err;
    }
  }
  return name;
}

/**
 * Marks session `name` Ready (podName p) in the API and starts `informer`, returning once its cache
 * shows it Ready: from then on a service reading the cache takes its word without the API.
 */
export async function readyInCache(informer: { start(): Promise<void>; get(name: string, ns: string): unknown }, ns: string, name: string): Promise<void> {
  await clients.custom.patchNamespacedCustomObjectStatus(
    { group: GROUP, version: VERSION, plural: SANDBOXSESSION_PLURAL, namespace: ns, name, body: { status: { phase: 'Ready', podName: 'p' } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
  await informer.start();
  await until(
    async () => (informer.get(name, ns) as { status?: { phase?: string } } | undefined)?.status?.phase === 'Ready',
    10_000,
    `session ${name} Ready in the cache`,
  );
}
