// Mode `tokens`: static bearer tokens from a Kubernetes Secret, in the kube-apiserver's static
// token file format (one `token,user,uid,"group1,group2"` line each, key `tokens.csv`). Only a
// SHA-256 digest of each token is kept; a lookup compares digests in constant time. The Secret is
// watched: an edit takes effect within seconds, without a restart.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { V1Secret } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { BEARER_TOKEN, badToken, missingToken, type AuthResult, type Authenticator, type Identity } from './identity.js';

export const TOKENS_KEY = 'tokens.csv';

const digest = (token: string): Buffer => createHash('sha256').update(token, 'utf8').digest();

/** Splits one CSV line, honouring double quotes (the groups column is quoted when it has commas). */
function csvFields(line: string): string[] {
  const out: string[] = [];
  let cur = '';
  let quoted = false;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i];
    if (quoted) {
      if (ch === '"' && line[i + 1] === '"') {
        cur += '"';
        i++;
      } else if (ch === '"') quoted = false;
      else cur += ch;
    } else if (ch === '"') quoted = true;
    else if (ch === ',') {
      out.push(cur);
      cur = '';
    } else cur += ch;
  }
  out.push(cur);
  return out.map((f) => f.trim());
}

export interface ParsedTokens {
  entries: Array<{ digest: Buffer; identity: Identity }>;
  /** Lines that were skipped, by number and why (never with the token). */
  problems: string[];
}

/** Pure: the tokens file → digests and identities. Blank lines and `#` comments are skipped. */
export function parseTokensCsv(text: string): ParsedTokens {
  const entries: ParsedTokens['entries'] = [];
  const problems: string[] = [];
  const seen = new Set<string>();
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const [token = '', user = '', , groups = ''] = csvFields(line);
    if (token.length < 16) return void problems.push(`line ${i + 1}: the token is shorter than 16 characters`);
    if (!BEARER_TOKEN.test(token))
      return void problems.push(
        `line ${i + 1}: the token contains characters a Bearer header cannot carry: use letters, digits and -._~+/ (and = only at the end)`,
      );
    if (user === '') return void problems.push(`line ${i + 1}: no user name`);
    const d = digest(token);
    const key = d.toString('hex');
    if (seen.has(key)) return void problems.push(`line ${i + 1}: the same token as an earlier line`);
    seen.add(key);
    const groupList = groups
      .split(',')
      .map((g) => g.trim())
      .filter(Boolean);
    entries.push({ digest: d, identity: Object.freeze({ user, groups: Object.freeze(groupList) }) });
  });
  return { entries, problems };
}

export class TokensAuthenticator implements Authenticator {
  readonly mode = 'tokens' as const;
  private entries: ParsedTokens['entries'] = [];

  constructor(private readonly log: Logger) {}

  /** Replaces the token table from the Secret's current content (undefined: the Secret is gone). */
  load(secret: V1Secret | undefined): void {
    const raw = secret?.data?.[TOKENS_KEY];
    const text = raw === undefined ? '' : Buffer.from(raw, 'base64').toString('utf8');
    const parsed = parseTokensCsv(text);
    this.entries = parsed.entries;
    if (parsed.problems.length) this.log.warn({ problems: parsed.problems }, 'Skipped lines of the tokens Secret');
    this.log.info(
      { tokens: parsed.entries.length, secret: secret?.metadata?.name },
      secret ? 'Loaded bearer tokens' : 'The tokens Secret is missing: every request is refused',
    );
  }

  async authenticate(token: string | undefined): Promise<AuthResult> {
    if (token === undefined) return missingToken();
    const d = digest(token);
    // Every entry is compared (no early exit), each in constant time.
    let found: Identity | undefined;
    for (const e of this.entries) if (timingSafeEqual(e.digest, d)) found = e.identity;
    return found ? { ok: true, identity: found } : badToken('The bearer token is not valid for this gateway.');
  }
}
