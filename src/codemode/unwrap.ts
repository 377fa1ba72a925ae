// What a program gets back from a tool (issue 11): structuredContent when present, else JSON
// parsed from the text, else the text; images and other content stay objects; isError becomes a
// ToolError with the upstream's message. Done here once for every sandbox language.
import type { UpstreamResult } from './types.js';

/** An upstream's error message is kept to this many characters. */
export const MAX_TOOL_ERROR_CHARS = 4000;

export type Unwrapped = { ok: true; value: unknown } | { ok: false; message: string };

export function unwrapResult(result: UpstreamResult): Unwrapped {
  const items = Array.isArray(result.content) ? (result.content as unknown[]) : [];
  if (result.isError === true) {
    const text = items
      .map((c) => (isText(c) ? c.text : ''))
      .filter((t) => t !== '')
      .join('\n');
    return { ok: false, message: text === '' ? 'the tool failed without a message' : text.slice(0, MAX_TOOL_ERROR_CHARS) };
  }
  if (result.structuredContent !== undefined && result.structuredContent !== null) return { ok: true, value: result.structuredContent };
  const values = items.map(unwrapItem);
  if (values.length === 0) return { ok: true, value: null };
  return { ok: true, value: values.length === 1 ? values[0] : values };
}

function unwrapItem(item: unknown): unknown {
  if (isText(item)) return parseText(item.text);
  // Images, audio, resources, links: the program gets the content object itself.
  return typeof item === 'object' && item !== null ? item : null;
}

/** JSON when the whole text is JSON, else the text. */
export function parseText(text: string): unknown {
  const t = text.trim();
  if (t === '' || !/^[[{"\d-]|^(true|false|null)$/.test(t)) return text;
  try {
    return JSON.parse(t) as unknown;
  } catch {
    return text;
  }
}

function isText(c: unknown): c is { type: 'text'; text: string } {
  return typeof c === 'object' && c !== null && (c as { type?: unknown }).type === 'text' && typeof (c as { text?: unknown }).text === 'string';
}
