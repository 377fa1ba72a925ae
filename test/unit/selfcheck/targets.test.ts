import { describe, expect, it } from 'vitest';
import { canaryTargets, gatewayAddresses, type TargetInputs } from '../../../src/selfcheck/targets.js';

const outside: TargetInputs = {
  apiServerUrl: 'https://192.168.1.5:6443',
  inCluster: false,
  ownAddresses: ['192.168.1.5'],
  bindAddress: '127.0.0.1',
  port: 8080,
  echoIp: '10.88.0.9',
};

describe('canaryTargets', () => {
  it('probes the API server, the echo pod and the metadata endpoint; skips the gateway outside the cluster', () => {
    expect(canaryTargets(outside)).toEqual({
      targets: [
        { name: 'api_server', host: '192.168.1.5', port: 6443, proto: 'tls' },
        { name: 'pod_ip', host: '10.88.0.9', port: 8080, proto: 'echo' },
        { name: 'metadata', host: '169.254.169.254', port: 80, proto: 'http' },
      ],
      gatewaySkipped: 'the gateway runs outside the cluster',
    });
  });

  it.each<[string, string | undefined, unknown[]]>([
    ['default port', 'https://10.0.0.1', [{ name: 'api_server', host: '10.0.0.1', port: 443, proto: 'tls' }]],
    ['IPv6 literal', 'https://[fd00::1]:6443', [{ name: 'api_server', host: 'fd00::1', port: 6443, proto: 'tls' }]],
    // The sandbox has no DNS: a name would only fail to resolve, which proves nothing.
    ['a host name', 'https://kube.example.com:6443', []],
    // Inside the pod, loopback is the canary itself.
    ['loopback', 'https://127.0.0.1:6443', []],
    ['no URL', undefined, []],
    ['garbage', 'not a url', []],
  ])('api server from %s', (_name, url, expected) => {
    const { targets } = canaryTargets({ ...outside, apiServerUrl: url });
    expect(targets.filter((t) => t.name === 'api_server')).toEqual(expected);
  });
});

describe('gatewayAddresses', () => {
  it.each<[string, Partial<TargetInputs>, { hosts: string[]; skipped?: string }]>([
    ['outside the cluster', {}, { hosts: [], skipped: 'the gateway runs outside the cluster' }],
    ['in a pod, bound to all addresses', { inCluster: true, bindAddress: '0.0.0.0', ownAddresses: ['10.88.0.2'] }, { hosts: ['10.88.0.2'] }],
    ['in a pod, bound to ::', { inCluster: true, bindAddress: '::', ownAddresses: ['10.88.0.2', 'fd00::2'] }, { hosts: ['10.88.0.2', 'fd00::2'] }],
    ['in a pod, bound to one address', { inCluster: true, bindAddress: '10.88.0.2' }, { hosts: ['10.88.0.2'] }],
    ['in a pod, loopback only', { inCluster: true, bindAddress: '127.0.0.1' }, { hosts: [], skipped: 'the gateway listens on 127.0.0.1 only' }],
    [
      'in a pod, random port',
      { inCluster: true, bindAddress: '0.0.0.0', port: 0 },
      { hosts: [], skipped: 'the gateway port is chosen at start (CODEMODE_PORT=0)' },
    ],
    [
      'in a pod without addresses',
      { inCluster: true, bindAddress: '0.0.0.0', ownAddresses: [] },
      { hosts: [], skipped: 'the gateway has no non-loopback address' },
    ],
  ])('%s', (_name, over, expected) => {
    expect(gatewayAddresses({ ...outside, ...over })).toEqual(expected);
  });
});
