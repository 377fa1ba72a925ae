// Rich outputs from a kernel (runtime/PROTOCOL.md, "Display"): images, HTML and tables a call's
// code displayed, sent as `display` frames before its result. Untrusted like every frame: the
// shape is checked with zod, sizes are capped per image, per call and in count (the frame itself
// is bounded by the decoder before it is buffered, see displayFrameBytes), an image must be of a
// closed set of types and start with that type's signature. Anything refused becomes a short
// note, never an exception: a bad display item must not cost the call or the stream. Only more
// display frames, or bytes of them, than any call can send breach it (displayFrameBudget).
import { z } from 'zod';
import { WORST_BYTES_PER_CHAR, capText, cutText } from './frames.js';

export interface DisplayLimits {
  /** Decoded bytes of one image. */
  maxImageBytes: number;
  /** Decoded bytes of all images of one call. */
  maxBytes: number;
  /** Items (images, texts, notes) of one call. */
  maxItems: number;
}

/** Characters of one note from a kernel: notes are one sentence each, and do not count against the texts' share. */
export const NOTE_CHARS = 500;

export const DEFAULT_DISPLAY_LIMITS: DisplayLimits = { maxImageBytes: 2 * 1024 * 1024, maxBytes: 5 * 1024 * 1024, maxItems: 10 };

export type DisplayItem =
  | { kind: 'image'; mime: ImageMime; data: string; bytes: number; path?: string; width?: number; height?: number }
  | { kind: 'text'; format: 'html' | 'table' | 'text' | 'note'; text: string };

export const IMAGE_MIMES = ['image/png', 'image/jpeg'] as const;
export type ImageMime = (typeof IMAGE_MIMES)[number];

const SIGNATURES: Record<ImageMime, Buffer> = {
  'image/png': Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
  'image/jpeg': Buffer.from([0xff, 0xd8, 0xff]),
};

/** Keys, kind, mime, path and punctuation of a display frame, with room to spare. */
const DISPLAY_FRAME_KEYS_BYTES = 8192;

/** The largest display frame a well-behaved kernel sends: one base64 image at the cap, plus keys. */
export function displayFrameBytes(limits: DisplayLimits): number {
  return Math.ceil(limits.maxImageBytes / 3) * 4 + DISPLAY_FRAME_KEYS_BYTES;
}

/**
 * Display frames one call may send: a kernel sends at most maxItems items and then one note
 * (runtime/PROTOCOL.md, "Display"); twice that, and some, is slack. Past it, or past
 * displayByteBudget, the stream is breached: each frame is parsed on the gateway's thread, and the
 * output frames' budget bounds only how many arrive a second, so a kernel sending display frames
 * of the largest size for as long as its call ran held the event loop for seconds (a replica's
 * every caller waited), while the items past the caps were dropped one by one.
 */
export function displayFrameBudget(limits: DisplayLimits): number {
  return 2 * (limits.maxItems + 1) + 16;
}

/**
 * Bytes of display frames one call may send: twice what its caps let a kernel send (the images
 * in base64, the texts' share of `capChars` at the worst JSON escape, a note per item, keys),
 * and one frame of the largest size on top.
 */
export function displayByteBudget(limits: DisplayLimits, capChars: number): number {
  const images = Math.ceil(limits.maxBytes / 3) * 4;
  const texts = WORST_BYTES_PER_CHAR * (Math.max(0, Math.floor(capChars)) + (limits.maxItems + 1) * NOTE_CHARS);
  return 2 * (images + texts + (limits.maxItems + 1) * DISPLAY_FRAME_KEYS_BYTES) + displayFrameBytes(limits);
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

const DisplayFrameSchema = z.discriminatedUnion('kind', [
  z.object({
    kind: z.literal('image'),
    mime: z.string().max(100),
    data: z.string(),
    path: z
      .string()
      .max(200)
      .regex(/^\/workspace\/figures\/\d{1,9}\.(png|jpg)$/)
      .nullish(),
  }),
  z.object({ kind: z.literal('text'), format: z.enum(['html', 'table', 'text', 'note']), text: z.string() }),
]);

/** What a call has received so far (counts against its caps). */
export interface DisplayTally {
  items: DisplayItem[];
  bytes: number;
  /** Characters of the texts (HTML, tables, text; not notes) accepted: they share the call's capChars. */
  chars: number;
  dropped: number;
  /** The kernel's own note on what it left out, accepted once beyond the count cap. */
  kernelNote: boolean;
}

export function newTally(): DisplayTally {
  return { items: [], bytes: 0, chars: 0, dropped: 0, kernelNote: false };
}

const note = (text: string): DisplayItem => ({ kind: 'text', format: 'note', text });

/** Adds one display frame's item (or a note saying why it was refused) to the tally. Never throws. */
export function acceptDisplay(message: unknown, tally: DisplayTally, limits: DisplayLimits, capChars: number): void {
  if (tally.items.length >= limits.maxItems) {
    // A well-behaved kernel sends at most maxItems items and then one note counting the rest.
    const r = DisplayFrameSchema.safeParse(message);
    if (!tally.kernelNote && r.success && r.data.kind === 'text' && r.data.format === 'note') {
      tally.kernelNote = true;
      tally.items.push({ kind: 'text', format: 'note', text: cutText(r.data.text, NOTE_CHARS) });
      return;
    }
    tally.dropped++;
    return;
  }
  tally.items.push(displayItem(message, tally, limits, capChars));
}

/** The notes a tally ends with: items dropped over the count cap. */
export function finishDisplay(tally: DisplayTally, limits: DisplayLimits): DisplayItem[] {
  if (tally.dropped === 0) return tally.items;
  return [...tally.items, note(`${tally.dropped} more display item(s) were not returned: at most ${limits.maxItems} per call.`)];
}

function displayItem(message: unknown, tally: DisplayTally, limits: DisplayLimits, capChars: number): DisplayItem {
  const r = DisplayFrameSchema.safeParse(message);
  if (!r.success) return note('A display item was refused: it was not a valid display frame.');
  const f = r.data;
  if (f.kind === 'text') return displayText(f.format, f.text, tally, capChars);
  if (!(IMAGE_MIMES as readonly string[]).includes(f.mime)) return note('An image was refused: only PNG and JPEG images are returned.');
  const mime = f.mime as ImageMime;
  // Base64 length tells the decoded size before anything is decoded.
  const bytes = Math.floor((f.data.length * 3) / 4) - (f.data.endsWith('==') ? 2 : f.data.endsWith('=') ? 1 : 0);
  if (f.data.length % 4 !== 0 || !BASE64.test(f.data)) return note('An image was refused: its data is not base64.');
  if (bytes > limits.maxImageBytes) return note(`An image of ${bytes} bytes was refused: over the cap of ${limits.maxImageBytes} bytes per image.`);
  if (tally.bytes + bytes > limits.maxBytes)
    return note(`An image of ${bytes} bytes was refused: over the cap of ${limits.maxBytes} bytes of images per call.`);
  const head = Buffer.from(f.data.slice(0, 32), 'base64');
  if (!head.subarray(0, SIGNATURES[mime].length).equals(SIGNATURES[mime]) || (mime === 'image/jpeg' && !jpegMarker(head[3])))
    return note(`An image was refused: its data is not a ${mime === 'image/png' ? 'PNG' : 'JPEG'}.`);
  // A PNG's size is shown to the caller: only as its IHDR states it, and only a valid one.
  const size = mime === 'image/png' ? pngSize(head) : undefined;
  if (mime === 'image/png' && size === undefined) return note('An image was refused: its data is not a PNG (no valid IHDR chunk after the signature).');
  tally.bytes += bytes;
  return { kind: 'image', mime, data: f.data, bytes, ...(f.path != null && { path: f.path }), ...size };
}

/**
 * A text item: a note is cut to NOTE_CHARS; HTML, tables and text share the call's `capChars`
 * (as a stream's output does): 100 items of the largest cap were 26 M characters in one reply.
 */
function displayText(format: 'html' | 'table' | 'text' | 'note', text: string, tally: DisplayTally, capChars: number): DisplayItem {
  if (format === 'note') return { kind: 'text', format, text: cutText(text, NOTE_CHARS) };
  const room = Math.max(0, Math.floor(capChars)) - tally.chars;
  if (room <= 0) return note(`A display text was not returned: the texts one call displays share the cap of ${capChars} characters.`);
  const c = capText(text, room);
  tally.chars += c.chars;
  // Cut: copied out of its frame (cutText), so the frame's whole string is not kept alive.
  return { kind: 'text', format, text: c.cut ? cutText(text, room) : c.text };
}

/** After a JPEG's FF D8 FF comes its first segment's marker: 0xC0–0xFE (0xFF would be fill, 0x00–0xBF no marker). */
const jpegMarker = (b: number | undefined): boolean => b !== undefined && b >= 0xc0 && b <= 0xfe;

/** PNG's largest width or height (2^31 - 1); zero is not allowed either. */
const PNG_MAX_SIDE = 0x7fffffff;

/**
 * Width and height from a PNG's IHDR (the first chunk, right after the signature, 13 bytes long),
 * or undefined when that is not a valid IHDR: a claim of 0×0 or 4294967295×4294967295 is not
 * repeated to the caller as the image's size.
 */
export function pngSize(head: Buffer): { width: number; height: number } | undefined {
  if (head.length < 24 || head.readUInt32BE(8) !== 13 || head.toString('latin1', 12, 16) !== 'IHDR') return undefined;
  const width = head.readUInt32BE(16);
  const height = head.readUInt32BE(20);
  if (width < 1 || width > PNG_MAX_SIDE || height < 1 || height > PNG_MAX_SIDE) return undefined;
  return { width, height };
}

/** status.images of a call that returned images: never the images, only how many and how big. */
export function imageCounts(display: readonly DisplayItem[] | undefined): { images?: { count: number; bytes: number } } {
  const images = (display ?? []).filter((d) => d.kind === 'image');
  return images.length > 0 ? { images: { count: images.length, bytes: images.reduce((s, d) => s + d.bytes, 0) } } : {};
}
