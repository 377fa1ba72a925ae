// Rich outputs in execute_code's result (src/exec/display.ts): after the text, each image as MCP
// `image` content (base64, its mime type) and each HTML/table/note as a labelled text item. The
// structured result carries only counts and sizes: images are never stored or repeated there.
import { z } from 'zod';
import type { CallToolResult } from '@modelcontextprotocol/server';
import type { DisplayItem } from '../../exec/display.js';

type Content = CallToolResult['content'][number];

export const DisplayOutput = z
  .object({
    images: z.int().min(0).describe('Images returned as image content after the text.'),
    image_bytes: z.int().min(0).describe('Their decoded size in bytes.'),
    items: z.int().min(0).describe('Display items in all (images, HTML, tables, notes).'),
  })
  .optional()
  .describe('What the code displayed (plots, display()); omitted when nothing.');

const LABELS = { html: 'HTML', table: 'table', text: 'display', note: 'note' } as const;

function kib(bytes: number): string {
  return bytes < 1024 ? `${bytes} B` : `${Math.round(bytes / 1024)} KiB`;
}

/** The content items for what the code displayed, in order. */
export function displayContent(items: readonly DisplayItem[] | undefined): Content[] {
  const out: Content[] = [];
  let n = 0;
  for (const item of items ?? []) {
    if (item.kind === 'text') {
      out.push({ type: 'text', text: `[${LABELS[item.format]}]\n${item.text}` });
      continue;
    }
    n++;
    const size = item.width !== undefined ? `${item.width}×${item.height} ` : '';
    const where = item.path !== undefined ? `, saved as ${item.path}` : '';
    out.push({ type: 'text', text: `[image ${n}: ${size}${item.mime.slice(6).toUpperCase()}, ${kib(item.bytes)}${where}]` });
    out.push({ type: 'image', data: item.data, mimeType: item.mime });
  }
  return out;
}

/** Counts and sizes only, for structuredContent and records. */
export function displaySummary(items: readonly DisplayItem[] | undefined): z.infer<typeof DisplayOutput> {
  if (!items?.length) return undefined;
  const images = items.filter((i) => i.kind === 'image');
  return { images: images.length, image_bytes: images.reduce((s, i) => s + i.bytes, 0), items: items.length };
}
