// Text counted and cut for bounds. The API server counts a CRD's maxLength in characters (code
// points), and so does zod's .max on strings; a text cut to that many UTF-16 code units always fits
// (a character is one or two units), and a surrogate pair is never split (a lone half is not valid
// UTF-8 on the wire).

/** Characters of `s` as the API server (maxLength) and zod (.max) count them: Unicode code points. */
export function characters(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

/** `text` within `max` code units: unchanged when it fits, else cut and ended with `tail`. */
export function cutUnits(text: string, max: number, tail = '…'): string {
  if (text.length <= max) return text;
  if (tail.length > max) tail = '';
  let end = Math.max(0, max - tail.length);
  const last = text.charCodeAt(end - 1);
  if (end > 0 && last >= 0xd800 && last <= 0xdbff) end--;
  return `${text.slice(0, end)}${tail}`;
}

/**
 * `text` within `max` UTF-8 bytes (e.g. an Event's note, 1024 bytes): unchanged when it fits, else
 * cut on a code point and ended with `tail`.
 */
export function cutUtf8(text: string, max: number, tail = '…'): string {
  if (text.length * 3 <= max || Buffer.byteLength(text) <= max) return text;
  const room = max - Buffer.byteLength(tail);
  let out = '';
  let bytes = 0;
  for (const ch of text) {
    bytes += Buffer.byteLength(ch);
    if (bytes > room) break;
    out += ch;
  }
  return `${out}${tail}`;
}

/** A C0 or C1 control character. */
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const CONTROLS = new RegExp(CONTROL.source, 'g');

/**
 * `text` with control characters as spaces: text that quotes the sandbox, shown by `kubectl
 * describe` or a terminal, must not replay its escape sequences or break its lines.
 */
export function withoutControls(text: string): string {
  return text.replace(CONTROLS, ' ');
}

/** Whether `text` holds a control character (see withoutControls). */
export function hasControls(text: string): boolean {
  return CONTROL.test(text);
}
