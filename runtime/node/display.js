'use strict';
// Rich outputs (runtime/PROTOCOL.md, "Display"), as runtime/python/codemode_kernel/display.py:
// what a call's code put in the display directory becomes `display` frames before its result.
// Everything there was written by user code: sizes are checked with lstat() before reading, at
// most the cap is read, only regular files count (no links followed), an image must start with
// its type's signature, and whatever is over a cap becomes a note.
const fs = require('node:fs');
const path = require('node:path');

const DEFAULTS = { displayMaxImageBytes: 2 * 1024 * 1024, displayMaxBytes: 5 * 1024 * 1024, displayMaxItems: 10 };
const IMAGES = { '.png': ['image/png', Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])], '.jpg': ['image/jpeg', Buffer.from([0xff, 0xd8, 0xff])] };
const TEXTS = { '.html': 'html', '.table': 'table', '.txt': 'text' };
const FIGURES_DIR = process.env.CODEMODE_FIGURES_DIR || '/workspace/figures';
// A figure's number: the gateway takes a path of 1 to 9 digits only (src/exec/display.ts), so the
// numbering goes on only from names like that (a file named by a timestamp in ms, 1e21.png or
// 0x10.png would have made every later path one it refuses, losing every image after), and an
// image past the last such number is returned unsaved.
const FIGURE_NUMBER = /^[0-9]{1,9}$/;
const MAX_FIGURE = 999_999_999;

function limitsOf(msg) {
  const out = {};
  for (const [k, d] of Object.entries(DEFAULTS)) out[k] = Number.isInteger(msg[k]) && msg[k] >= 0 ? msg[k] : d;
  return out;
}

function clear(dir) {
  let names = [];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return;
  }
  for (const n of names) {
    try {
      fs.unlinkSync(path.join(dir, n));
    } catch {
      // a directory made by user code stays; it is never read
    }
  }
}

const note = (text) => ({ kind: 'text', format: 'note', text });

/** At most cap + 1 bytes of a regular file, not following links; undefined if not one. */
function readCapped(file, cap) {
  const fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  try {
    if (!fs.fstatSync(fd).isFile()) return undefined;
    const buf = Buffer.alloc(cap + 1);
    let n = 0;
    for (let r; n < buf.length && (r = fs.readSync(fd, buf, n, buf.length - n, null)) > 0; ) n += r;
    return buf.subarray(0, n);
  } finally {
    fs.closeSync(fd);
  }
}

let nextFigure;
function saveFigure(data, ext) {
  try {
    fs.mkdirSync(FIGURES_DIR, { recursive: true });
    if (nextFigure === undefined) {
      nextFigure = 1;
      for (const n of fs.readdirSync(FIGURES_DIR)) {
        const stem = n.split('.')[0];
        if (FIGURE_NUMBER.test(stem)) nextFigure = Math.max(nextFigure, Number(stem) + 1);
      }
    }
    if (nextFigure > MAX_FIGURE) return undefined;
    const file = path.join(FIGURES_DIR, `${nextFigure++}${ext}`);
    fs.writeFileSync(file, data);
    return file;
  } catch {
    return undefined; // e.g. the workspace is full: the image still goes back, unsaved
  }
}

/** One item; its texts share the call's capChars with the texts before it (charsLeft). */
function item(file, ext, maxImage, room, capChars, charsLeft) {
  try {
    const size = fs.lstatSync(file).size;
    if (IMAGES[ext]) {
      const [mime, signature] = IMAGES[ext];
      if (size > maxImage) return note(`an image of ${size} bytes was not returned: over the cap of ${maxImage} bytes per image`);
      if (size > room) return note(`an image of ${size} bytes was not returned: over the cap of bytes of images per call`);
      const data = readCapped(file, maxImage);
      if (data === undefined || data.length > maxImage || data.length > room) return note(`an image was not returned: not a regular file of at most ${maxImage} bytes`);
      if (!data.subarray(0, signature.length).equals(signature)) return note(`an image was not returned: the file is not a ${mime.slice(6).toUpperCase()}`);
      const saved = saveFigure(data, ext);
      return { kind: 'image', mime, data: data.toString('base64'), size: data.length, ...(saved && { path: saved }) };
    }
    if (TEXTS[ext]) {
      if (charsLeft <= 0) return note(`a display text was not returned: the texts one call displays share the cap of ${capChars} characters`);
      const data = readCapped(file, 4 * charsLeft + 4);
      if (data === undefined) return note('a display item was not returned: not a regular file');
      return { kind: 'text', format: TEXTS[ext], text: Array.from(data.toString('utf8')).slice(0, charsLeft).join('') };
    }
    return note(`a display item was not returned: unknown type ${JSON.stringify(ext).slice(0, 40)}`);
  } catch (err) {
    return note(`a display item could not be read: ${err.code || 'error'}`);
  }
}

/** The display items of the call that just ended, as frame bodies; empties the directory. */
function collect(dir, limits, capChars) {
  let names;
  try {
    names = fs.readdirSync(dir).filter((n) => !n.startsWith('.')).sort();
  } catch {
    return [];
  }
  const items = [];
  let total = 0;
  let chars = 0;
  let dropped = 0;
  try {
    for (const n of names) {
      if (items.length >= limits.displayMaxItems) {
        dropped++;
        continue;
      }
      const it = item(path.join(dir, n), path.extname(n).toLowerCase(), limits.displayMaxImageBytes, limits.displayMaxBytes - total, capChars, capChars - chars);
      if (it.kind === 'image') {
        total += it.size;
        delete it.size;
      } else if (it.format !== 'note') chars += Array.from(it.text).length;
      items.push(it);
    }
  } finally {
    clear(dir);
  }
  if (dropped) items.push(note(`${dropped} more display item(s) were not returned: at most ${limits.displayMaxItems} per call`));
  return items;
}

module.exports = { clear, collect, limitsOf };
