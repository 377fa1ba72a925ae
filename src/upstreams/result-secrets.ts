// The credentials the gateway sends an upstream (header values, its URL's user, password and query
// values) must never reach sandbox code through a tool's result: a tool that echoes its request
// (an HTTP echo, a debug tool, an error quoting "invalid token …") would hand a program the team's
// tokens. Every string of a result is cleaned — text, a link's uri, name and description, an
// embedded resource's uri and text, `_meta` and `annotations` of every block and of the result,
// structuredContent — and a base64 payload (an image's or audio's data, a resource's blob) that
// holds a credential once decoded is withheld whole: replacing text inside it would only corrupt it.
import type { CallToolResult } from '@modelcontextprotocol/client';

/** An Authorization-style value: a scheme, then the credentials (`Bearer <token>`). */
const SCHEME = /^[A-Za-z][\w!#$%&'*+.^`|~-]*\s+(\S.*)$/s;

/** Shorter values are not looked for: they would match ordinary text (and bytes) by chance. */
const MIN_SECRET_CHARS = 4;

/**
 * What is looked for, longest first (a value that holds another is removed whole): each secret,
 * and a header value's credentials without their scheme — the bearer token is sent as
 * `Bearer <token>`, and an upstream that quotes it ("invalid token <token>") quotes the token alone.
 */
export function secretValues(secrets: Iterable<string>): string[] {
  const all = [...secrets].flatMap((s) => [s, SCHEME.exec(s)?.[1] ?? '']);
  return [...new Set(all)].filter((s) => s.length >= MIN_SECRET_CHARS).sort((a, b) => b.length - a.length);
}

/** Removes every secret value from `text`, at any length. */
export function removeSecrets(text: string, secrets: Iterable<string>): string {
  return removeValues(text, secretValues(secrets));
}

function removeValues(text: string, values: readonly string[]): string {
  let out = text;
  for (const s of values) if (out.includes(s)) out = out.split(s).join('[redacted]');
  return out;
}

/**
 * `result` with no credential of `server` left in it (`secrets`: what the gateway sends it). A
 * nesting deeper than the stack allows throws, and the call fails: nothing is returned unredacted.
 */
export function withoutSecrets(result: CallToolResult, secrets: Iterable<string>, server: string): CallToolResult {
  const values = secretValues(secrets);
  if (values.length === 0) return result;
  const clean = (text: string): string => removeValues(text, values);
  const { content, ...rest } = result;
  // structuredContent, the result's _meta, and whatever else the upstream put in it.
  const out = mapStrings(rest, clean) as CallToolResult;
  if (content !== undefined) {
    out.content = (Array.isArray(content) ? content.map((b) => cleanBlock(b, values, clean, server)) : mapStrings(content, clean)) as CallToolResult['content'];
  }
  return out;
}

/** One content block cleaned; one whose base64 payload holds a credential becomes a text block saying so. */
function cleanBlock(block: unknown, values: readonly string[], clean: (text: string) => string, server: string): unknown {
  if (typeof block !== 'object' || block === null || Array.isArray(block)) return mapStrings(block, clean);
  const b = block as Record<string, unknown>;
  if ((b.type === 'image' || b.type === 'audio') && typeof b.data === 'string') {
    const { data, ...fields } = b;
    if (holdsSecret(data as string, values)) return withheld(`${b.type} content`, server);
    return { ...(mapStrings(fields, clean) as object), data };
  }
  const r = b.resource;
  if (b.type === 'resource' && typeof r === 'object' && r !== null && typeof (r as { blob?: unknown }).blob === 'string') {
    const { blob, ...fields } = r as Record<string, unknown>;
    if (holdsSecret(blob as string, values)) return withheld('embedded resource', server);
    const { resource: _resource, ...others } = b;
    return { ...(mapStrings(others, clean) as object), resource: { ...(mapStrings(fields, clean) as object), blob } };
  }
  return mapStrings(b, clean);
}

/**
 * Does a base64 payload hold a secret, as written or decoded? Bounded: the payload is part of one
 * message of the upstream, at most CODEMODE_UPSTREAM_MESSAGE_MAX_BYTES (bounded-fetch.ts), and its
 * bytes are 3/4 of its length; each value is one linear search of them.
 */
function holdsSecret(payload: string, values: readonly string[]): boolean {
  if (values.some((v) => payload.includes(v))) return true;
  // Node's decoder takes either alphabet (base64 and base64url) and skips whitespace.
  const bytes = Buffer.from(payload, 'base64');
  return values.some((v) => bytes.includes(v));
}

function withheld(what: string, server: string): { type: 'text'; text: string } {
  return {
    type: 'text',
    text: `[The ${what} that upstream ${server} returned here was withheld: it contained a credential the gateway sends to ${server}. The rest of the result is intact; ask the administrator of ${server} why the tool returns its credentials.]`,
  };
}

/** `value` (parsed JSON) with `fn` applied to every string in it, keys included. */
export function mapStrings(value: unknown, fn: (s: string) => string): unknown {
  if (typeof value === 'string') return fn(value);
  if (Array.isArray(value)) return value.map((v) => mapStrings(v, fn));
  if (typeof value === 'object' && value !== null) {
    // fromEntries defines each key as its own property: a "__proto__" key stays a key.
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [fn(k), mapStrings(v, fn)]));
  }
  return value;
}
