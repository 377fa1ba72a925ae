// What a log line may say of an error whose message can quote its input (a parser's, a library's
// that echoes a request): its class and the start of its message, up to the first quote, colon or
// line break — the part a library writes itself ("Rejected inbound request (name-header-mismatch)",
// "Unexpected token") — never what follows (the header value, the body, the code).

/** Characters of a message's head a log line keeps at most. */
export const ERROR_HEAD_MAX_CHARS = 120;

/** Pure: `Name: head of the message` of an error (or of a thrown non-error, its type). */
export function errorHead(err: unknown): string {
  const name = err instanceof Error && /^[A-Za-z]{1,40}$/.test(err.name) ? err.name : err instanceof Error ? 'Error' : typeof err;
  const message = err instanceof Error ? err.message : '';
  const head = (message.split(/["'`:\r\n]/, 1)[0] ?? '').trim().slice(0, ERROR_HEAD_MAX_CHARS);
  return head === '' ? name : `${name}: ${head}`;
}
