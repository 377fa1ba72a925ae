// Kubernetes API requests per run, counted two ways:
// - server side: the API server's own apiserver_request_total before/after a batch, by verb and
//   resource. It counts every client (scheduler, kubelet, other people's tests on the cluster).
// - client side: a tally of the requests the operator's own KubeConfig sends (timestamped), which
//   is exact about our writes and lets the profile put them on a time line.
import https from 'node:https';
import type { KubeConfig, RequestContext } from '@kubernetes/client-node';
import type { WritesBeforeReply } from './profile.js';

/** The resources a run touches (sessions soon); everything else the API server counts is ignored. */
export const RESOURCES = new Set(['sandboxruns', 'sandboxsessions', 'pods', 'events', 'networkpolicies']);
export const WRITE_VERBS = new Set(['create', 'patch', 'update', 'delete', 'deletecollection']);

/**
 * Which of the operator's requests the execute_code reply waits for (read from
 * src/runs/kube-run-service.ts, src/controller/run-executor.ts and src/controller/warm-pool.ts).
 * The outcome is returned as soon as it is known: the final status patch, the pod delete and the
 * completion Event follow in the background, and a Running status patch (code still running
 * after 250 ms) is not awaited either. The NetworkPolicy check happens once per namespace and
 * process (so ~0 per run in a batch). Cold: the pod is watched until Ready through the informer
 * (no request of its own), then one exec of the runner script.
 */
export const COLD_CRITICAL_PATH: ReadonlySet<string> = new Set([
  'create sandboxruns',
  'get networkpolicies',
  'create networkpolicies',
  'create pods',
  'connect pods/exec',
]);
/**
 * Warm: the run takes the pool pod this process reserved ahead of time (the reservation is the
 * claim, a patch guarded by resourceVersion, made after the previous run was recorded), and the
 * code goes as one framed request over the kernel stream the operator opened when the pool pod
 * became ready: no pod write and no exec before the code starts. The pod's adoption by the run (a
 * patch) overlaps the execution; the next reservation follows the outcome. Without a reservation
 * (a process's first warm run, or calls overlapping) the claim patch is on the path as before:
 * the measured row (writes completed before the reply) shows which happened.
 */
export const WARM_CRITICAL_PATH: ReadonlySet<string> = new Set(['create sandboxruns', 'get networkpolicies', 'create networkpolicies']);

const SERVER_VERBS: Record<string, string> = {
  POST: 'create',
  PUT: 'update',
  PATCH: 'patch',
  APPLY: 'patch',
  DELETE: 'delete',
  DELETECOLLECTION: 'deletecollection',
  GET: 'get',
  LIST: 'list',
  WATCH: 'watch',
  CONNECT: 'connect',
};

export type Counts = Record<string, number>;

export async function scrapeApiserver(kc: KubeConfig): Promise<string> {
  const server = kc.getCurrentCluster()?.server;
  if (!server) throw new Error('The kubeconfig has no current cluster');
  const opts: https.RequestOptions = {};
  await kc.applyToHTTPSOptions(opts);
  return new Promise((resolve, reject) => {
    https
      .get(new URL('/metrics', server), opts, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => (res.statusCode === 200 ? resolve(body) : reject(new Error(`GET /metrics: HTTP ${res.statusCode}: ${body.slice(0, 200)}`))));
      })
      .on('error', reject);
  });
}

/** apiserver_request_total summed over codes, keyed "verb resource[/subresource]". */
export function parseRequestTotals(metrics: string): Counts {
  const out: Counts = {};
  for (const line of metrics.split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    const close = line.lastIndexOf('}');
    const labels = Object.fromEntries([...line.slice(0, close).matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    if (!RESOURCES.has(labels.resource ?? '')) continue;
    const verb = SERVER_VERBS[labels.verb ?? ''] ?? (labels.verb ?? '').toLowerCase();
    const key = `${verb} ${labels.resource}${labels.subresource ? `/${labels.subresource}` : ''}`;
    out[key] = (out[key] ?? 0) + Number(line.slice(close + 1));
  }
  return out;
}

export function diff(after: Counts, before: Counts): Counts {
  const out: Counts = {};
  for (const [k, v] of Object.entries(after)) if (v - (before[k] ?? 0) > 0) out[k] = v - (before[k] ?? 0);
  return out;
}

export function sumWhere(c: Counts, pred: (verb: string, key: string) => boolean): number {
  return Object.entries(c).reduce((s, [k, v]) => (pred(k.split(' ')[0] ?? '', k) ? s + v : s), 0);
}

export function byVerb(c: Counts): Counts {
  const out: Counts = {};
  for (const [k, v] of Object.entries(c)) out[k.split(' ')[0] ?? ''] = (out[k.split(' ')[0] ?? ''] ?? 0) + v;
  return out;
}

export function perRun(c: Counts, runs: number): Counts {
  return Object.fromEntries(Object.entries(c).map(([k, v]) => [k, Math.round((v / runs) * 100) / 100]));
}

export interface TalliedRequest {
  t: number;
  key: string;
}

/** "verb resource[/subresource]" of a REST URL, as the API server would count it. */
export function classifyUrl(method: string, url: string): string {
  const u = new URL(url);
  const parts = u.pathname.split('/').filter(Boolean);
  const rest = parts[0] === 'api' ? parts.slice(2) : parts.slice(3);
  const scoped = rest[0] === 'namespaces' && rest.length >= 3 ? rest.slice(2) : rest;
  const [resource = '', name, sub] = scoped;
  const res = sub ? `${resource}/${sub}` : resource;
  const m = method.toUpperCase();
  if (m === 'GET') return `${u.searchParams.get('watch') === 'true' ? 'watch' : name ? 'get' : 'list'} ${res}`;
  if (m === 'DELETE' && !name) return `deletecollection ${res}`;
  return `${SERVER_VERBS[m] ?? m.toLowerCase()} ${res}`;
}

/** Counts every request sent with one KubeConfig (instance hooks; the library is untouched). */
export class RequestTally {
  readonly requests: TalliedRequest[] = [];

  constructor(kc: KubeConfig) {
    const auth = kc.applySecurityAuthentication.bind(kc);
    kc.applySecurityAuthentication = (ctx: RequestContext): Promise<void> => {
      this.requests.push({ t: performance.now(), key: classifyUrl(ctx.getHttpMethod(), ctx.getUrl()) });
      return auth(ctx);
    };
    // The exec websocket is the only user of applyToHTTPSOptions in the operator: a cold run's
    // runner exec, or a kernel relay stream (pool pods when they become ready, sessions).
    const https_ = kc.applyToHTTPSOptions.bind(kc);
    kc.applyToHTTPSOptions = (opts): Promise<void> => {
      this.requests.push({ t: performance.now(), key: 'connect pods/exec' });
      return https_(opts);
    };
  }

  countsBetween(from: number, to: number): Counts {
    const out: Counts = {};
    for (const r of this.requests) if (r.t >= from && r.t < to) out[r.key] = (out[r.key] ?? 0) + 1;
    return out;
  }

  between(from: number, to: number): TalliedRequest[] {
    return this.requests.filter((r) => r.t >= from && r.t < to);
  }
}

export interface ApiRequestsResult {
  runs: number;
  /** The operator's own requests per run (client tally). */
  operatorPerRun: Counts;
  operatorWritesPerRun: number;
  criticalPathWritesPerRun: number;
  notAwaitedWritesPerRun: number;
  /** What the critical path was taken to be (see COLD_CRITICAL_PATH). */
  criticalPath: string[];
  /** Every client's requests per run on our resources (API server metrics). */
  apiserverPerRun: Counts;
  apiserverByVerbPerRun: Counts;
  apiserverWritesPerRun: number;
  /** The API server saw more SandboxRun/Pod creates than we sent: others shared the cluster. */
  otherClientsSeen: boolean;
  /** Measured per call (CallTimer): writes for the run completed before the reply (see writesBeforeReply). */
  measuredBeforeReply?: WritesBeforeReply;
}

/**
 * Per-run figures; writes not on `critical` are not awaited by the reply (final and Running status
 * patches, pod delete, Events, pool refill).
 */
export function summarizeApiRequests(runs: number, server: Counts, operator: Counts, critical: ReadonlySet<string>): ApiRequestsResult {
  const r = (x: number): number => Math.round((x / runs) * 100) / 100;
  const isWrite = (verb: string): boolean => WRITE_VERBS.has(verb);
  return {
    runs,
    operatorPerRun: perRun(operator, runs),
    operatorWritesPerRun: r(sumWhere(operator, isWrite)),
    criticalPathWritesPerRun: r(sumWhere(operator, (v, k) => isWrite(v) && critical.has(k))),
    notAwaitedWritesPerRun: r(sumWhere(operator, (v, k) => isWrite(v) && !critical.has(k))),
    criticalPath: [...critical].filter((k) => WRITE_VERBS.has(k.split(' ')[0] ?? '')),
    apiserverPerRun: perRun(server, runs),
    apiserverByVerbPerRun: perRun(byVerb(server), runs),
    apiserverWritesPerRun: r(sumWhere(server, isWrite)),
    otherClientsSeen: ['create sandboxruns', 'create pods'].some((k) => (server[k] ?? 0) > (operator[k] ?? 0)),
  };
}
