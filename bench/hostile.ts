// A benign client's latency with a hostile neighbour on the same gateway, against the same client
// measured quietly in the same run (issue 14: goal ≤ 1.5× at p95). The benign client calls
// print(1) in its own python session; the hostile client loops over the attacks of the hostile
// e2e suite in its own sandboxes. Attacks are expected to fail; only the benign figures count.
import { connect, type TestClient } from '../test/e2e/helpers/operator.js';
import { log } from './context.js';
import type { Summary } from './stats.js';
import { rounded, summarize } from './stats.js';

/** Each attack is one execute_code; `session` ones run in the hostile client's session. */
export const ATTACKS: ReadonlyArray<{ name: string; language: string; code: string; timeout_seconds: number; session?: boolean }> = [
  { name: 'output flood', language: 'python', code: "import sys\nfor _ in range(2000): sys.stdout.write('x' * 65536)", timeout_seconds: 10 },
  { name: 'fork bomb', language: 'bash', code: ':(){ :|:& };:\nwait', timeout_seconds: 5 },
  { name: 'memory bomb', language: 'python', code: 'a = []\nwhile True: a.append(bytearray(10**7))', timeout_seconds: 10 },
  { name: 'cpu burn', language: 'python', code: 'while True: pass', timeout_seconds: 5 },
  { name: 'exception flood', language: 'python', code: "raise ValueError('x' * 10**7)", timeout_seconds: 10 },
  {
    name: 'forged frames',
    language: 'python',
    session: true,
    // Writes garbage frames into every socket the kernel process holds (its control channel).
    code: [
      'import os, socket',
      'for fd in os.listdir("/proc/self/fd"):',
      '    try:',
      '        s = socket.socket(fileno=os.dup(int(fd)))',
      '        s.sendall(b"4\\nnull" + b"999999\\n{" + b"x" * 65536)',
      '    except Exception:',
      '        pass',
    ].join('\n'),
    timeout_seconds: 10,
  },
];

export interface HostileResult {
  quietMs: Summary;
  underAttackMs: Summary;
  benignErrors: number;
  attacks: number;
  p50Ratio: number | null;
  p95Ratio: number | null;
}

async function sessionOf(client: TestClient): Promise<string> {
  const r = await client.callTool('create_session', { language: 'python' });
  const s = r.structuredContent?.session;
  if (r.isError || typeof s !== 'string') throw new Error(`create_session failed: ${JSON.stringify(r.structuredContent ?? r.content).slice(0, 200)}`);
  return s;
}

async function benignBatch(client: TestClient, session: string, n: number): Promise<{ samples: number[]; errors: number }> {
  const samples: number[] = [];
  let errors = 0;
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const r = await client.callTool('execute_code', { session, code: 'print(1)' }).catch(() => undefined);
    const ms = performance.now() - t0;
    if (!r || r.isError || r.structuredContent?.stdout !== '1\n') errors++;
    else samples.push(ms);
  }
  return { samples, errors };
}

/** Loops over ATTACKS until stopped; returns how many were made. */
function startAttacker(url: string): { stop(): Promise<number> } {
  let stopping = false;
  let made = 0;
  const loop = (async (): Promise<void> => {
    const client = await connect(url, 'current');
    let session: string | undefined;
    try {
      while (!stopping) {
        for (const a of ATTACKS) {
          if (stopping) break;
          if (a.session) session ??= await sessionOf(client).catch(() => undefined);
          const args = { code: a.code, language: a.language, timeout_seconds: a.timeout_seconds, ...(a.session && session ? { session } : {}) };
          const r = await client.callTool('execute_code', args).catch(() => undefined);
          made++;
          // A session the attack broke is Lost: the next attack opens a new one.
          if (a.session && r?.structuredContent?.phase !== 'Succeeded') session = undefined;
        }
      }
    } finally {
      await client.close();
    }
  })();
  return {
    async stop(): Promise<number> {
      stopping = true;
      await loop.catch((err: unknown) => log(`hostile: attacker stopped with ${String(err)}`));
      return made;
    },
  };
}

const ratio = (a: number, b: number): number | null => (Number.isFinite(a) && Number.isFinite(b) && b > 0 ? Math.round((a / b) * 100) / 100 : null);

export async function hostileNeighbour(url: string, n: number): Promise<HostileResult> {
  const client = await connect(url, 'current');
  try {
    const session = await sessionOf(client);
    await benignBatch(client, session, 5);
    log(`hostile: benign session print(1) × ${n}, quiet`);
    const quiet = await benignBatch(client, session, n);
    log(`hostile: benign session print(1) × ${n} while a hostile client attacks (${ATTACKS.map((a) => a.name).join(', ')})`);
    const attacker = startAttacker(url);
    // Let the first attack get going before recording.
    await new Promise((r) => setTimeout(r, 2000));
    const loud = await benignBatch(client, session, n);
    const attacks = await attacker.stop();
    const quietMs = rounded(summarize(quiet.samples));
    const underAttackMs = rounded(summarize(loud.samples));
    return {
      quietMs,
      underAttackMs,
      benignErrors: quiet.errors + loud.errors,
      attacks,
      p50Ratio: ratio(underAttackMs.median, quietMs.median),
      p95Ratio: ratio(underAttackMs.p95, quietMs.p95),
    };
  } finally {
    await client.close();
  }
}
