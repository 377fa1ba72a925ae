// The Helm chart on the real cluster, as a platform team uses it: lint, a server-side dry run of
// the rendered manifests, install with two replicas, a real MCP client through the Service's
// ClusterIP (kube-proxy programs it on this node; there is no cluster DNS), `helm test`, an
// upgrade to another image tag while a client keeps calling, and an uninstall that leaves no
// sandbox pod, policy or lease behind. deploy/ must be the chart rendered with defaults.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNamespace, deleteNamespace, testKube, until } from './helpers/kube.js';
import { CHART, KUBECTL, ctr, helm, kubectl, sh } from './helpers/helm.js';
import { connect, type TestClient } from './helpers/operator.js';
import { LABEL_POOL } from '../../src/sandbox/pod.js';

const k = testKube();
const release = 'cm';
const IMAGE = 'codemode.local/gateway';
const newTag = `e2e-${randomBytes(3).toString('hex')}`;
let ns = '';
let dryNs = '';
let installed = false;
const sandboxNs = (): string => `${ns}-sandboxes`;
// The chart's default auth mode is tokens: one caller's token, and the same for the helm test pod.
const token = `t-${randomBytes(16).toString('hex')}`;
const auth = { authorization: `Bearer ${token}` };
/** Small requests: the shared 2-core node is often full of other suites' pods. */
const LIGHT = ['--set', 'resources.requests.cpu=10m', '--set', 'config.cpuRequest=10m'];
/** The upgraded version's sandbox CPU request: a pool template of its own. */
const NEW_CPU_REQUEST = '20m';
/** Every optional object on (ServiceMonitor and HTTPRoute need CRDs this cluster does not have). */
const OPTIONAL = [
  '--set',
  'ingress.enabled=true',
  '--set',
  'ingress.hosts={mcp.example.com}',
  '--set',
  'httpRoute.enabled=true',
  '--set',
  'httpRoute.hostnames={mcp.example.com}',
  '--set',
  'httpRoute.parentRefs[0].name=gw',
  '--set',
  'serviceMonitor.enabled=true',
];

async function gatewayPods(): Promise<Array<{ name: string; image: string; ready: boolean; terminating: boolean }>> {
  const pods = await k.core.listNamespacedPod({
    namespace: ns,
    labelSelector: `app.kubernetes.io/instance=${release},app.kubernetes.io/name=codemode-operator`,
  });
  return pods.items.map((p) => ({
    name: p.metadata?.name ?? '',
    image: p.spec?.containers[0]?.image ?? '',
    ready: p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true,
    terminating: p.metadata?.deletionTimestamp !== undefined,
  }));
}

/**
 * Follows the gateway pods' logs from now on (kubectl logs -f: the pods that exist now, e.g. the
 * old version's through an upgrade); stop() returns their warnings and errors, for a failure's message.
 */
function followGatewayLogs(): { stop(): string } {
  const selector = `app.kubernetes.io/instance=${release},app.kubernetes.io/name=codemode-operator`;
  const child = spawn(KUBECTL, ['logs', '-f', '-n', ns, '-l', selector, '--prefix', '--max-log-requests', '10', '--tail', '-1'], { env: process.env });
  let text = '';
  child.stdout.on('data', (d: Buffer) => (text += d.toString('utf8')));
  child.stderr.on('data', (d: Buffer) => (text += d.toString('utf8')));
  return {
    stop(): string {
      child.kill();
      return text
        .split('\n')
        .filter((l) => /"level":"(warn|error|fatal)"/.test(l))
        .slice(-40)
        .join('\n');
    },
  };
}

/** The chart rendered into the dry-run namespace, which is also its sandbox namespace. */
const dryTemplate = (...args: string[]): Promise<string> =>
  helm('template', release, CHART, '-n', dryNs, '--set', 'sandboxNamespace.create=false', '--set', `sandboxNamespace.name=${dryNs}`, ...args);

async function serviceUrl(): Promise<{ ip: string; url: string }> {
  const svc = await k.core.readNamespacedService({ namespace: ns, name: 'cm-codemode-operator' });
  const ip = svc.spec?.clusterIP ?? '';
  return { ip, url: `http://${ip}:8080/mcp` };
}

beforeAll(async () => {
  ns = await createNamespace(k, 'helm');
  dryNs = await createNamespace(k, 'helm-dry');
  // A second tag for the same image, as a registry would hold for a new release.
  await ctr('images', 'tag', `${IMAGE}:v1`, `${IMAGE}:${newTag}`);
});

afterAll(async () => {
  if (installed) await helm('uninstall', release, '-n', ns, '--wait', '--timeout', '5m').catch(() => undefined);
  await ctr('images', 'rm', `${IMAGE}:${newTag}`).catch(() => undefined);
  for (const n of [ns, dryNs, `${ns}-sandboxes`]) if (n) await deleteNamespace(k, n);
});

describe('charts/codemode-operator', () => {
  it('passes helm lint --strict, with and without the optional objects', async () => {
    await helm('lint', '--strict', CHART);
    await helm('lint', '--strict', CHART, ...OPTIONAL);
  });

  it('renders manifests the API server accepts (kubectl apply --dry-run=server)', async () => {
    const manifests = await dryTemplate(
      '--set',
      'ingress.enabled=true',
      '--set',
      'ingress.hosts={mcp.example.com}',
      '--set',
      'extraEnv[0].name=NODE_USE_ENV_PROXY',
      '--set-string',
      'extraEnv[0].value=1',
    );
    expect(manifests).toMatch(/- name: NODE_USE_ENV_PROXY\n\s+value: "1"\n/);
    const out = await kubectl(['apply', '--dry-run=server', '-f', '-'], manifests);
    expect(out).toMatch(/deployment\.apps\/cm-codemode-operator created \(server dry run\)/);
    expect(out).toMatch(/role\.rbac\.authorization\.k8s\.io\/cm-codemode-operator created/);
    expect(out).toMatch(/ingress\.networking\.k8s\.io\/cm-codemode-operator created/);
    // The owner policy: cluster-scoped, named after the release's namespace, exempting the release's ServiceAccount.
    expect(out).toMatch(new RegExp(`validatingadmissionpolicy\\.admissionregistration\\.k8s\\.io/${dryNs}-cm-codemode-operator-owner created`));
    expect(manifests).toMatch(new RegExp(`username != 'system:serviceaccount:${dryNs}:cm-codemode-operator'`));
    expect(await helm('template', release, CHART, '-n', dryNs, '--set', 'ownerPolicy.enabled=false')).not.toMatch(/ValidatingAdmissionPolicy/);
    // The default install (its own sandbox namespace) renders a Namespace the API server accepts too.
    const ownNs = await helm('template', release, CHART, '-n', dryNs, '--show-only', 'templates/sandbox-namespace.yaml');
    expect(await kubectl(['apply', '--dry-run=server', '-f', '-'], ownNs)).toMatch(/namespace\/.* created \(server dry run\)/);
  });

  // The Role and, in auth mode kubernetes, the one ClusterRole, applied for real and asked through
  // impersonation: what the gateway uses and nothing it does not (replacing a run, a session or a
  // status; SubjectAccessReviews).
  it('grants the gateway what it uses and no more (kubectl auth can-i)', async () => {
    const rbac = await dryTemplate('--set', 'config.authMode=kubernetes', '--show-only', 'templates/rbac.yaml');
    const clusterWide = [...rbac.matchAll(/kind: Cluster(?:Role|RoleBinding)\nmetadata:\n  name: (\S+)/g)].map((m) => m[1] ?? '');
    expect(clusterWide).toEqual([`${dryNs}-cm-codemode-operator-tokenreview`, `${dryNs}-cm-codemode-operator-tokenreview`]);
    await kubectl(['apply', '-f', '-'], rbac);
    try {
      const as = `system:serviceaccount:${dryNs}:cm-codemode-operator`;
      const canI = (verb: string, resource: string, namespaced = true): Promise<string> =>
        kubectl(['auth', 'can-i', verb, resource, '--as', as, ...(namespaced ? ['-n', dryNs] : [])]).then(
          (out) => out.trim(),
          (err: unknown) => (/\bno\b/.test(String(err)) ? 'no' : Promise.reject(err as Error)),
        );
      const answers = await Promise.all(
        (
          [
            ['create', 'tokenreviews.authentication.k8s.io', false, 'yes'],
            ['create', 'subjectaccessreviews.authorization.k8s.io', false, 'no'],
            ['patch', 'sandboxruns.codemode.dev', true, 'yes'],
            ['patch', 'sandboxruns.codemode.dev/status', true, 'yes'],
            ['patch', 'sandboxsessions.codemode.dev/status', true, 'yes'],
            ['update', 'sandboxruns.codemode.dev', true, 'no'],
            ['update', 'sandboxsessions.codemode.dev/status', true, 'no'],
            ['create', 'pods/exec', true, 'yes'],
            ['list', 'secrets', true, 'no'],
          ] as const
        ).map(async ([verb, resource, namespaced, want]) => [`${verb} ${resource}`, await canI(verb, resource, namespaced), want]),
      );
      for (const [what, got, want] of answers) expect(got, what).toBe(want);
    } finally {
      await kubectl(['delete', 'clusterrole,clusterrolebinding', `${dryNs}-cm-codemode-operator-tokenreview`, '--ignore-not-found']);
    }
  });

  // What publishing the endpoint and each auth mode render: the OAuth metadata routed beside /mcp,
  // the public URL from the Ingress, egress to the OIDC issuer, and refusals of a route to nowhere.
  const OIDC = ['--set', 'config.authMode=oidc', '--set', 'config.oidcAudience=mcp'];
  it.each([
    [
      'an Ingress with TLS routes the OAuth metadata and names its host as the public URL',
      [
        '--set',
        'ingress.enabled=true',
        '--set',
        'ingress.hosts={mcp.example.com}',
        '--set',
        'ingress.tls[0].hosts={mcp.example.com}',
        '--set',
        'ingress.tls[0].secretName=t',
      ],
      [/path: \/\.well-known\/oauth-protected-resource\n\s+pathType: Prefix/, /name: CODEMODE_PUBLIC_URL\n\s+value: "https:\/\/mcp\.example\.com"/],
      [],
    ],
    [
      'an explicit public URL wins',
      ['--set', 'ingress.enabled=true', '--set', 'ingress.hosts={mcp.example.com}', '--set', 'config.publicUrl=https://agents.example.com'],
      [/name: CODEMODE_PUBLIC_URL\n\s+value: "https:\/\/agents\.example\.com"/],
      [],
    ],
    [
      'an HTTPRoute routes the OAuth metadata',
      ['--set', 'httpRoute.enabled=true', '--set', 'httpRoute.parentRefs[0].name=gw'],
      [/type: PathPrefix\n\s+value: \/\.well-known\/oauth-protected-resource/],
      [],
    ],
    [
      "oidc: egress to the issuer's and the JWKS URL's ports",
      [...OIDC, '--set', 'config.oidcIssuer=http://kc.example:8080/realms/x', '--set', 'config.oidcJwksUrl=https://keys.example.com/jwks'],
      [/- ports:\n\s+- port: 8080\n\s+protocol: TCP\n\s+- port: 443\n\s+protocol: TCP\n/],
      [],
    ],
    [
      'oidc: networkPolicy.oidcEgress instead',
      [...OIDC, '--set', 'config.oidcIssuer=https://login.example.com', '--set', 'networkPolicy.oidcEgress[0].to[0].ipBlock.cidr=10.9.9.9/32'],
      [/cidr: 10\.9\.9\.9\/32/],
      [/issuer's discovery document/],
    ],
    [
      'tokens: no egress beyond the API server, DNS and the stdio bridges',
      [],
      [],
      [/issuer's discovery document/, /port: 443\n\s+protocol: TCP\n\s+- port: 6443\n[\s\S]*port: 443/],
    ],
  ] as const)('renders: %s', async (_what, args, present, absent) => {
    const out = await dryTemplate('--set', 'networkPolicy.apiServer.cidrs={10.0.0.1/32}', ...args);
    for (const re of present) expect(out).toMatch(re);
    for (const re of absent) expect(out).not.toMatch(re);
    // Whatever the values, the API server accepts what they render.
    // (An HTTPRoute's CRD is not on this cluster: that document is left out.)
    const known = out.split(/^---$/m).filter((doc) => !/^kind: HTTPRoute$/m.test(doc));
    await kubectl(['apply', '--dry-run=server', '-f', '-'], known.join('---'));
  });

  it.each([
    ['an Ingress without hosts', ['--set', 'ingress.enabled=true'], /ingress\.enabled needs ingress\.hosts/],
    [
      'an HTTPRoute without a Gateway',
      ['--set', 'httpRoute.enabled=true', '--set', 'httpRoute.hostnames={a.example.com}'],
      /httpRoute\.enabled needs httpRoute\.parentRefs/,
    ],
  ])('refuses %s, saying what to set', async (_what, args, message) => {
    await expect(helm('template', release, CHART, '-n', dryNs, ...args)).rejects.toThrow(message);
  });

  it.each([
    ['a CODEMODE_* variable (set from config)', 'extraEnv[0].name=CODEMODE_PORT', /extraEnv\[\]\.name CODEMODE_PORT: .*set the config value instead/],
    ['an entry without a name', 'extraEnv[0].value=x', /extraEnv\/0.*missing property 'name'/],
  ])('refuses extraEnv with %s, saying why', async (_what, value, message) => {
    await expect(helm('template', release, CHART, '-n', dryNs, '--set', value)).rejects.toThrow(message);
  });

  it('is what deploy/codemode-operator.yaml was rendered from', async () => {
    await sh(process.execPath, ['--import', 'tsx', 'scripts/render-deploy.ts', '--check']);
  });

  it('installs with two replicas and serves execute_code through the Service', async () => {
    await k.core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'helm-test-token' }, stringData: { token } } });
    await helm(
      'install',
      release,
      CHART,
      '-n',
      ns,
      '--set',
      'replicaCount=2',
      '--set',
      'image.pullPolicy=Never',
      '--set',
      'config.warmPoolSize=1',
      '--set',
      'tests.tokenSecret.name=helm-test-token',
      ...LIGHT,
      '--wait',
      '--timeout',
      '8m',
    );
    installed = true;
    // The tokens Secret lives in the sandbox namespace the release created; the gateway watches it.
    await k.core.createNamespacedSecret({
      namespace: sandboxNs(),
      body: { metadata: { name: 'codemode-tokens' }, stringData: { 'tokens.csv': `${token},helm-user,u1,"dev"\n` } },
    });
    const { ip, url } = await serviceUrl();
    // The host name clients use must be allowed (DNS-rebinding protection): here, the ClusterIP.
    await helm('upgrade', release, CHART, '-n', ns, '--reuse-values', '--set', `config.allowedHosts=${ip}`, '--wait', '--timeout', '5m');
    await until(
      async () => {
        const pods = await gatewayPods();
        return pods.length === 2 && pods.every((p) => p.ready && !p.terminating);
      },
      180_000,
      'two Ready gateway pods',
    );

    // Tokens are picked up from the watched Secret within seconds.
    let client: TestClient | undefined;
    await until(async () => (client = await connect(url, 'current', auth).catch(() => undefined)) !== undefined, 60_000, 'the token to be accepted');
    if (!client) throw new Error('no client');
    const r = await client.callTool('execute_code', { code: 'print(6 * 7)' });
    await client.close();
    expect(r.structuredContent).toMatchObject({ phase: 'Succeeded', stdout: '42\n', exit_code: 0 });

    // A cold pod's Started Event is watched by the pod's name (src/sandbox/container-started.ts):
    // the chart's Role allows it (without, cold runs still work, their kernel stream opens later).
    const sa = (await kubectl(['get', 'deployment', '-n', ns, '-o', 'jsonpath={.items[0].spec.template.spec.serviceAccountName}'])).trim();
    for (const verb of ['list', 'watch'])
      expect((await kubectl(['auth', 'can-i', verb, 'events.events.k8s.io', '-n', sandboxNs(), '--as', `system:serviceaccount:${ns}:${sa}`])).trim()).toBe(
        'yes',
      );

    // Each replica keeps its replica Lease (the chart's RBAC) and sees the other's: both report two
    // replicas up on /metrics (read through the API server's pod proxy; lists come every 10 s).
    for (const pod of await gatewayPods()) {
      let last = '';
      await until(
        async () => {
          last = await k.core
            .connectGetNamespacedPodProxyWithPath({ namespace: ns, name: `${pod.name}:8080`, path: 'metrics' })
            .then(String, (err: unknown) => `(no answer: ${String(err)})`);
          return /^codemode_gateway_replicas 2$/m.test(last);
        },
        60_000,
        `${pod.name} to count two gateway replicas`,
      ).catch((err: unknown) => {
        throw new Error(
          `${String(err)}; its last /metrics: ${last
            .split('\n')
            .filter((l) => l.startsWith('codemode_gateway') || l.startsWith('('))
            .join(' | ')
            .slice(0, 600)}`,
        );
      });
    }

    // Sandboxes run in the separate, PSA-restricted namespace; the gateway's holds none.
    const sbx = await k.core.readNamespace({ name: sandboxNs() });
    expect(sbx.metadata?.labels?.['pod-security.kubernetes.io/enforce']).toBe('restricted');
    const inGateway = await k.core.listNamespacedPod({ namespace: ns, labelSelector: 'codemode.dev/sandbox=true' });
    expect(inGateway.items).toEqual([]);
  }, 600_000);

  it('passes helm test (an MCP client pod runs print(1) through the endpoint)', async () => {
    // The pod exits non-zero unless execute_code printed 1; it is deleted once it succeeded.
    const out = await helm('test', release, '-n', ns, '--timeout', '5m');
    expect(out).toMatch(/Phase:\s+Succeeded/);
  }, 400_000);

  it('upgrades to another image tag and pool template under load: no failed call, no run lost or repeated, old pool pods replaced', async () => {
    const { url } = await serviceUrl();
    const client = await connect(url, 'current', auth);
    // Session calls append their number to a list in the interpreter: a call executed twice, or
    // lost after it was answered, shows in the list; transient runs are counted from the API.
    const created = await client.callTool('create_session', { language: 'python' });
    const session = String(created.structuredContent?.session);
    // Created through one replica, used through the other at once (the Service balances).
    const init = await client.callTool('execute_code', { session, code: 'calls = []' });
    expect(init.isError, JSON.stringify(init.content)).toBeFalsy();
    const failures: string[] = [];
    const answered: number[] = [];
    let calls = 0;
    let stop = false;
    const logs = followGatewayLogs();
    const caller = (async (): Promise<void> => {
      while (!stop) {
        calls++;
        const n = calls;
        try {
          const inSession = n % 2 === 0;
          const r = await client.callTool(
            'execute_code',
            inSession ? { session, code: `calls.append(${n}); print(${n})` } : { code: `print(${n})  # upgrade-load` },
          );
          const out = r.structuredContent as { phase?: string; stdout?: string } | undefined;
          if (out?.phase !== 'Succeeded' || out.stdout !== `${n}\n`) failures.push(`call ${n}: ${JSON.stringify(r.content).slice(0, 1000)}`);
          else if (inSession) answered.push(n);
        } catch (err) {
          failures.push(`call ${n}: ${String((err as Error).message)}`);
        }
      }
    })();
    try {
      // Two versions side by side: the new one also shapes its pool pods differently (another CPU
      // request, so another template hash); each replica claims only pods of its own hash.
      await helm(
        'upgrade',
        release,
        CHART,
        '-n',
        ns,
        '--reuse-values',
        '--set',
        `image.tag=${newTag}`,
        '--set',
        `config.cpuRequest=${NEW_CPU_REQUEST}`,
        '--wait',
        '--timeout',
        '8m',
      );
      // --wait returns when the new pods are Ready; the old ones may still be draining.
      await until(
        async () => {
          const pods = await gatewayPods();
          return pods.length === 2 && pods.every((p) => p.image === `${IMAGE}:${newTag}` && p.ready && !p.terminating);
        },
        300_000,
        'only new-tag gateway pods',
      );
    } finally {
      stop = true;
      await caller;
    }
    // The old version's unclaimed pool pods are replaced by the new leader, never left to serve.
    await until(
      async () => {
        const pool = await k.core.listNamespacedPod({ namespace: sandboxNs(), labelSelector: `${LABEL_POOL}=warm` });
        const live = pool.items.filter((p) => p.metadata?.deletionTimestamp === undefined);
        return live.length > 0 && live.every((p) => p.spec?.containers.every((c) => c.resources?.requests?.cpu === NEW_CPU_REQUEST));
      },
      300_000,
      `only pool pods of the new template (cpu request ${NEW_CPU_REQUEST})`,
    );
    const problems = logs.stop();
    try {
      expect(failures, `the old gateway pods' warnings and errors:\n${problems}`).toEqual([]);
      expect(calls).toBeGreaterThan(3);
      // Every session call ran exactly once, in order, and the session kept its state.
      const list = await client.callTool('execute_code', { session, code: 'print(calls)' });
      expect((list.structuredContent as { stdout?: string }).stdout, `the gateway pods' warnings and errors:\n${problems}`).toBe(`[${answered.join(', ')}]\n`);
      // Every transient run is recorded, terminal and Succeeded: none lost, none left running. A
      // run's final status is written right after its reply, so the last calls' records may still
      // be on their way: read until every run has a phase (at most a minute), then judge.
      type Run = { spec: { code: string; session?: string }; status?: { phase?: string } };
      let transient: Run[] = [];
      const readRuns = async (): Promise<boolean> => {
        const runs = (await k.custom.listNamespacedCustomObject({
          group: 'codemode.dev',
          version: 'v1alpha1',
          namespace: sandboxNs(),
          plural: 'sandboxruns',
        })) as { items: Run[] };
        transient = runs.items.filter((r) => r.spec.session === undefined && r.spec.code.endsWith('# upgrade-load'));
        return transient.every((r) => ['Succeeded', 'Failed', 'TimedOut'].includes(r.status?.phase ?? ''));
      };
      await until(readRuns, 60_000, 'every transient run recorded with its outcome').catch(() => undefined);
      expect(
        transient.filter((r) => r.status?.phase !== 'Succeeded').map((r) => `${r.spec.code}: ${r.status?.phase}`),
        `the gateway pods' warnings and errors:\n${problems}`,
      ).toEqual([]);
      expect(new Set(transient.map((r) => r.spec.code)).size).toBe(transient.length);
    } finally {
      await client.callTool('close_session', { session }).catch(() => undefined);
      await client.close();
    }
  }, 900_000);

  it('uninstalls without leaving sandbox pods, policies or leases behind', async () => {
    await helm('uninstall', release, '-n', ns, '--wait', '--timeout', '8m');
    installed = false;
    await until(
      async () => {
        try {
          await k.core.readNamespace({ name: sandboxNs() });
          return false;
        } catch {
          return true;
        }
      },
      300_000,
      `namespace ${sandboxNs()} to be deleted`,
    );
    // The gateway's own pods finish their shutdown (runs in flight, quiet period) after Helm
    // returned; wait for them, bounded, before looking for leftovers.
    await until(async () => (await k.core.listNamespacedPod({ namespace: ns })).items.length === 0, 180_000, `the gateway pods in ${ns} to exit`);
    for (const namespace of [ns, sandboxNs()]) {
      const [pods, policies, leases] = await Promise.all([
        k.core.listNamespacedPod({ namespace }),
        k.networking.listNamespacedNetworkPolicy({ namespace }),
        kubectl(['get', 'leases', '-n', namespace, '-o', 'name']),
      ]);
      expect(pods.items.map((p) => p.metadata?.name)).toEqual([]);
      expect(policies.items.map((p) => p.metadata?.name)).toEqual([]);
      expect(leases.trim()).toBe('');
    }
  }, 900_000);
});
