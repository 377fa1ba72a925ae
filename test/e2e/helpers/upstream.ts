// Real upstream MCP servers for code-mode tests: the reference "everything" server (npm
// @modelcontextprotocol/server-everything) over Streamable HTTP as a child process, and a small
// reverse proxy in front of it that requires an API key header. The everything server cannot show
// the headers it received, so the proxy is how a test proves a Secret's header reached the
// upstream: without the right key the upstream answers 401.
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, request, type Server } from 'node:http';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const require = createRequire(import.meta.url);
const EVERYTHING = join(dirname(require.resolve('@modelcontextprotocol/server-everything/package.json')), 'dist/index.js');

async function freePort(): Promise<number> {
  const s = createNetServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

export interface Everything {
  port: number;
  url: string;
  /** Kills the process (SIGKILL: the upstream vanishes, as a crashed pod would). */
  kill(): Promise<void>;
  /** Starts it again on the same port. */
  restart(): Promise<void>;
}

export async function startEverything(): Promise<Everything> {
  const port = await freePort();
  let child: ChildProcess | undefined;
  const launch = async (): Promise<void> => {
    const c = spawn(process.execPath, [EVERYTHING, 'streamableHttp'], { env: { ...process.env, PORT: String(port) }, stdio: ['ignore', 'ignore', 'pipe'] });
    child = c;
    await new Promise<void>((resolve, reject) => {
      let err = '';
      const timer = setTimeout(() => reject(new Error(`everything server did not start: ${err}`)), 30_000);
      c.stderr?.on('data', (d: Buffer) => {
        err += d.toString();
        if (/listening on port/i.test(err)) {
          clearTimeout(timer);
          resolve();
        }
      });
      c.on('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`everything server exited with ${code}: ${err}`));
      });
    });
  };
  await launch();
  return {
    port,
    url: `http://127.0.0.1:${port}/mcp`,
    async kill(): Promise<void> {
      const c = child;
      if (!c || c.exitCode !== null) return;
      await new Promise<void>((r) => {
        c.once('exit', () => r());
        c.kill('SIGKILL');
      });
    },
    restart: launch,
  };
}

export interface KeyProxy {
  url: string;
  /** Requests that carried the right key (and were forwarded). */
  authorized(): number;
  refused(): number;
  close(): Promise<void>;
}

/** Forwards to 127.0.0.1:`targetPort` only requests whose `header` equals `key`; others get 401. */
export async function startKeyProxy(targetPort: number, header: string, key: string): Promise<KeyProxy> {
  let ok = 0;
  let no = 0;
  const server: Server = createServer((req, res) => {
    if (req.headers[header.toLowerCase()] !== key) {
      no++;
      res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ error: `missing or wrong ${header}` }));
      return;
    }
    ok++;
    const up = request({ host: '127.0.0.1', port: targetPort, method: req.method, path: req.url, headers: req.headers }, (ur) => {
      res.writeHead(ur.statusCode ?? 502, ur.headers);
      ur.pipe(res);
    });
    up.on('error', () => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' }).end('upstream down');
      else res.destroy();
    });
    res.on('close', () => up.destroy());
    req.pipe(up);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    authorized: () => ok,
    refused: () => no,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
