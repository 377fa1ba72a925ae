// Packages in sessions on the real cluster, from the real registries (PyPI and npm, or the
// mirrors CODEMODE_PACKAGES_* name): a package asked for at create_session and one added with
// install_packages are imported in the session; the deny list refuses a package and a package
// that needs a denied one; an allow-list profile refuses before anything starts; a SandboxSession
// applied with a package that does not exist fails saying which; the sandbox still has no network
// after an install; a delivery that fails part-way leaves no partial archive in the session; no
// fetcher pod is left behind.
import { lookup } from 'node:dns/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GROUP, LABEL_PACKAGE_FETCHER, SANDBOXPROFILE_PLURAL, SANDBOXSESSION_PLURAL, VERSION, type SandboxSession } from '../../src/api/v1alpha1/index.js';
import { loadConfig } from '../../src/config/index.js';
import { SANDBOX_IMAGE, createNamespace, deleteNamespace, testKube, until } from './helpers/kube.js';
import { connect, startOperator, type RunningOperator, type TestClient, type ToolResult } from './helpers/operator.js';

const k = testKube();
let ns = '';
let op: RunningOperator;
let mcp: TestClient;
const api = { group: GROUP, version: VERSION };
const text = (r: ToolResult): string => r.content.map((c) => c.text ?? '').join('\n');
const sc = (r: ToolResult): Record<string, unknown> => r.structuredContent ?? {};

async function session(name: string): Promise<SandboxSession> {
  return (await k.custom.getNamespacedCustomObject({ ...api, namespace: ns, plural: SANDBOXSESSION_PLURAL, name })) as SandboxSession;
}

async function run(name: string, code: string): Promise<string> {
  const r = await mcp.callTool('execute_code', { session: name, code });
  expect(r.isError, text(r)).toBeFalsy();
  return text(r);
}

beforeAll(async () => {
  ns = await createNamespace(k, 'packages');
  op = await startOperator(ns, { CODEMODE_WARM_POOL_SIZE: '1', CODEMODE_PACKAGES_DENY: 'pypi:six' });
  await k.custom.createNamespacedCustomObject({
    ...api,
    namespace: ns,
    plural: SANDBOXPROFILE_PLURAL,
    body: {
      apiVersion: `${GROUP}/${VERSION}`,
      kind: 'SandboxProfile',
      metadata: { name: 'locked' },
      spec: { image: SANDBOX_IMAGE, packages: { allow: ['pypi:tabulate'] } },
    },
  });
  mcp = await connect(op.url, 'current');
});
afterAll(async () => {
  await mcp?.close();
  await op?.stop();
  await deleteNamespace(k, ns);
});

describe('packages in sessions', () => {
  let py = '';

  it('installs what create_session asks for before the session is ready, and records it in spec.packages', async () => {
    const r = await mcp.callTool('create_session', { language: 'python', packages: ['tabulate==0.9.0'] });
    expect(r.isError, text(r)).toBeFalsy();
    py = sc(r).session as string;
    expect(await run(py, 'import tabulate\nprint(tabulate.__version__, tabulate.__file__)')).toMatch(/0\.9\.0 \/workspace\/\.packages\/python\/tabulate/);
    const s = await session(py);
    expect(s.spec.packages).toEqual(['tabulate==0.9.0']);
  });

  it('installs into a live session with install_packages; the interpreter keeps its state and imports it at once', async () => {
    await run(py, 'kept = 41');
    const r = await mcp.callTool('install_packages', { session: py, packages: ['tabulate==0.10.0'] });
    expect(r.isError, text(r)).toBeFalsy();
    expect(sc(r)).toMatchObject({ session: py, ecosystem: 'pypi', installed: [{ name: 'tabulate', version: '0.10.0' }] });
    // The upgrade replaced the old version's files: one dist-info, the new module layout.
    const after = await run(
      py,
      'import importlib.metadata as m, os\nprint(kept + 1, m.version("tabulate"), sorted(os.listdir("/workspace/.packages/python")))',
    );
    expect(after).toMatch(/42 0\.10\.0/);
    expect(after).not.toMatch(/0\.9\.0\.dist-info|tabulate\.py/);
    expect((await session(py)).spec.packages).toEqual(['tabulate==0.9.0', 'tabulate==0.10.0']);
  });

  it('refuses a denied package, and a package that needs one, saying which and why', async () => {
    const direct = await mcp.callTool('install_packages', { session: py, packages: ['six'] });
    expect(direct.isError).toBe(true);
    expect(text(direct)).toMatch(/six may not be installed: the profile's deny list has pypi:six/);
    const dependency = await mcp.callTool('install_packages', { session: py, packages: ['python-dateutil==2.9.0.post0'] });
    expect(dependency.isError).toBe(true);
    expect(text(dependency)).toMatch(/six [0-9.]+ may not be installed \(needed by what you asked for\): the profile's deny list has pypi:six/);
    expect(await run(py, 'import importlib.util as u\nprint(u.find_spec("dateutil") is None)')).toMatch(/True/);
  });

  it('leaves the sandbox without network after an install', async () => {
    const index = new URL(loadConfig().packagesPypiIndexUrl).hostname;
    const { address } = await lookup(index);
    const out = await run(
      py,
      `import socket\ntry:\n    socket.create_connection((${JSON.stringify(address)}, 443), timeout=3)\n    print("CONNECTED")\nexcept OSError as e:\n    print("BLOCKED", type(e).__name__)`,
    );
    expect(out).toMatch(/BLOCKED/);
  });

  it('removes the partial archive from the session when the delivery fails part-way', async () => {
    // Sandbox code makes the incoming archive read-only as soon as its first chunk is in, so the
    // next chunk cannot be appended. Babel's archive is ~10 MB: three chunks of 4 MiB.
    await run(
      py,
      [
        'import glob, os, threading, time',
        'stop_spoiling = threading.Event()',
        'def spoil():',
        '    while not stop_spoiling.is_set():',
        '        for p in glob.glob("/workspace/.packages/.incoming-*.tgz"):',
        '            try:',
        '                os.chmod(p, 0o444)',
        '            except OSError:',
        '                pass',
        '        time.sleep(0.005)',
        'threading.Thread(target=spoil, daemon=True).start()',
      ].join('\n'),
    );
    let r: ToolResult;
    try {
      r = await mcp.callTool('install_packages', { session: py, packages: ['babel==2.16.0'] });
    } finally {
      await run(py, 'stop_spoiling.set()');
    }
    expect(r.isError, text(r)).toBe(true);
    expect(text(r)).toMatch(/could not be copied into the session/);
    const left = await run(py, 'import os\nprint(sorted(os.listdir("/workspace/.packages")))');
    expect(left).toMatch(/'python'/);
    expect(left).not.toMatch(/\.incoming-/);
    expect(await run(py, 'import importlib.util as u\nprint(u.find_spec("babel") is None)')).toMatch(/True/);
  });

  it('installs npm packages into a node session, where require() finds them', async () => {
    const c = await mcp.callTool('create_session', { language: 'node' });
    expect(c.isError, text(c)).toBeFalsy();
    const node = sc(c).session as string;
    const r = await mcp.callTool('install_packages', { session: node, packages: ['is-number@7.0.0'] });
    expect(r.isError, text(r)).toBeFalsy();
    expect(sc(r)).toMatchObject({ ecosystem: 'npm', installed: [{ name: 'is-number', version: '7.0.0' }] });
    expect(await run(node, "const isNumber = require('is-number'); console.log(isNumber(5), isNumber('x'))")).toMatch(/true false/);
  });

  it("refuses what a profile's allow list leaves out before a session exists, and a bash session's install", async () => {
    const r = await mcp.callTool('create_session', { language: 'python', profile: 'locked', packages: ['requests'] });
    expect(r.isError).toBe(true);
    expect(text(r)).toMatch(/requests may not be installed: it is not in the profile's allow list/);
    const bash = await mcp.callTool('create_session', { language: 'bash', packages: ['tabulate'] });
    expect(bash.isError).toBe(true);
    expect(text(bash)).toMatch(/A bash session cannot install packages/);
  });

  it('fails a SandboxSession applied with a package that does not exist, naming it', async () => {
    const name = 'no-such-package';
    await k.custom.createNamespacedCustomObject({
      ...api,
      namespace: ns,
      plural: SANDBOXSESSION_PLURAL,
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'SandboxSession',
        metadata: { name },
        spec: { language: 'python', packages: ['codemode-no-such-package-4f1c'] },
      },
    });
    await until(async () => (await session(name)).status?.phase === 'Failed', 240_000, 'the session Failed');
    const s = await session(name);
    expect(s.status).toMatchObject({ reason: 'PackagesFailed' });
    expect(s.status?.message).toMatch(/codemode-no-such-package-4f1c/);
  });

  it('leaves no fetcher pod behind', async () => {
    await until(
      async () => (await k.core.listNamespacedPod({ namespace: ns, labelSelector: LABEL_PACKAGE_FETCHER })).items.length === 0,
      60_000,
      'fetcher pods deleted',
    );
  });
});
