// CODEMODE_PUBLIC_URL is the gateway's base URL: the protected-resource metadata names the resource
// `${publicUrl}/mcp` and 401 answers point to `${publicUrl}/.well-known/...`. With a path, query or
// fragment those URLs are wrong (https://mcp.example.com/mcp/mcp, https://x?a=1/mcp) and clients
// fail their authorization: such a value is refused at start, saying what to give instead.
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../../src/config/index.js';

function problems(value: string): string[] {
  try {
    loadConfig({ CODEMODE_PUBLIC_URL: value });
  } catch (err) {
    if (err instanceof ConfigError) return err.problems.map((p) => p.problem);
    throw err;
  }
  return [];
}

describe('CODEMODE_PUBLIC_URL', () => {
  it.each([
    ['https://mcp.example.com', 'https://mcp.example.com'],
    ['https://mcp.example.com/', 'https://mcp.example.com'],
    ['http://127.0.0.1:8080', 'http://127.0.0.1:8080'],
    ['https://[::1]:8443/', 'https://[::1]:8443'],
  ])('%s is taken as %s', (value, publicUrl) => {
    expect(loadConfig({ CODEMODE_PUBLIC_URL: value }).publicUrl).toBe(publicUrl);
  });

  it.each([
    ['https://mcp.example.com/mcp', /^must not have a path \(it has \/mcp\).*give only the scheme, host and optional port, e\.g\. https:\/\/mcp\.example\.com/],
    ['https://mcp.example.com/gateway/', /^must not have a path \(it has \/gateway\/\)/],
    ['https://mcp.example.com?tenant=a', /^must not have a query or fragment: give only the scheme, host/],
    ['https://mcp.example.com/?', /^must not have a query or fragment/],
    ['https://mcp.example.com#top', /^must not have a query or fragment/],
    ['https://user:pw@mcp.example.com', /^must not contain a user name or password/],
    ['mcp.example.com', /^must be a valid url/],
    ['ftp://mcp.example.com', /^must be a valid url/],
    ['mailto:ops/gateway', /^must be a valid url/],
  ])('%s is refused, saying what is wrong and what to give', (value, problem) => {
    const found = problems(value);
    expect(found).toHaveLength(1);
    expect(found[0]).toMatch(problem);
  });
});
