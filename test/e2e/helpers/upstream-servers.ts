// UpstreamServer objects in a test's namespace: create one, read its status and Ready condition.
import { GROUP, UPSTREAMSERVER_PLURAL, VERSION, type UpstreamServerStatus } from '../../../src/api/v1alpha1/index.js';
import type { TestKube } from './kube.js';

export async function createUpstream(k: TestKube, namespace: string, name: string, spec: Record<string, unknown>): Promise<void> {
  await k.custom.createNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace,
    plural: UPSTREAMSERVER_PLURAL,
    body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'UpstreamServer', metadata: { name }, spec },
  });
}

export async function upstreamStatus(k: TestKube, namespace: string, name: string): Promise<UpstreamServerStatus | undefined> {
  const o = (await k.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: UPSTREAMSERVER_PLURAL, name })) as {
    status?: UpstreamServerStatus;
  };
  return o.status;
}

/** The Ready condition (empty while there is none). */
export const readyOf = (s: UpstreamServerStatus | undefined): { status?: string; reason?: string; message?: string } =>
  s?.conditions?.find((c) => c.type === 'Ready') ?? {};

/**
 * A Streamable HTTP handshake made by hand against `url` (initialize, initialized, GET stream,
 * tools/list, DELETE), each step's status, server headers and first bytes of body: when a server
 * never becomes Ready, this says which request failed and what answered it (the bridge always
 * answers an error with a JSON-RPC body; an empty one came from somewhere else).
 */
export async function handshakeTrace(url: string): Promise<string> {
  const steps: string[] = [];
  const base = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' };
  let session: string | undefined;
  const step = async (name: string, method: string, body?: unknown): Promise<void> => {
    const headers: Record<string, string> = { ...base, ...(session && { 'mcp-session-id': session }) };
    const abort = AbortSignal.timeout(method === 'GET' ? 1_000 : 10_000);
    try {
      const res = await fetch(url, { method, headers, signal: abort, ...(body !== undefined && { body: JSON.stringify(body) }) });
      session ??= res.headers.get('mcp-session-id') ?? undefined;
      const text = method === 'GET' ? '(stream not read)' : (await res.text()).slice(0, 200);
      const seen = ['content-type', 'content-length', 'server', 'mcp-session-id'].map((h) => `${h}=${res.headers.get(h) ?? '-'}`).join(' ');
      steps.push(`${name}: HTTP ${res.status} ${res.statusText} [${seen}] ${JSON.stringify(text)}`);
      if (method === 'GET') await res.body?.cancel().catch(() => undefined);
    } catch (err) {
      steps.push(`${name}: ${String((err as Error).cause ?? err).slice(0, 200)}`);
    }
  };
  await step('initialize', 'POST', {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'e2e-trace', version: '1' } },
  });
  await step('initialized', 'POST', { jsonrpc: '2.0', method: 'notifications/initialized' });
  await step('GET stream', 'GET');
  await step('tools/list', 'POST', { jsonrpc: '2.0', id: 2, method: 'tools/list' });
  await step('DELETE', 'DELETE');
  return `handshake with ${url}:\n  ${steps.join('\n  ')}`;
}
