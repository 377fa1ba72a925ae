'use strict';
// display() for Node sandbox code: images, HTML and tables returned to the caller after the
// call's text (as in the Python module runtime/sdk/python/codemode/display.py). Built-ins only.
//
//   const { display } = require('codemode');
//   display(pngBuffer);                          // a Buffer/Uint8Array of a PNG or JPEG (sniffed)
//   display('<b>hi</b>', { mime: 'text/html' });
//   display([{ a: 1 }, { a: 2 }]);               // an array of objects -> a text table
//
// Items go as files into $CODEMODE_DISPLAY_DIR; the kernel collects, checks and caps them when
// the call ends.
const fs = require('node:fs');
const path = require('node:path');
const util = require('node:util');

// Across vm realms (a session cell's own Uint8Array), instanceof fails; util.types does not.
const isBytes = (v) => util.types.isUint8Array(v);

const EXT = { 'image/png': '.png', 'image/jpeg': '.jpg', 'text/html': '.html', 'text/plain': '.txt', table: '.table' };
const TABLE_MAX_ROWS = 30;
let seq = 0;

function write(ext, data) {
  const dir = process.env.CODEMODE_DISPLAY_DIR;
  if (!dir) throw new Error('display() works inside a codemode sandbox only (CODEMODE_DISPLAY_DIR is not set)');
  const name = `${String(process.hrtime.bigint()).padStart(20, '0')}-${process.pid}-${++seq}${ext}`;
  const tmp = path.join(dir, `.${name}`); // dot files are not collected: the rename is atomic
  fs.writeFileSync(tmp, data);
  fs.renameSync(tmp, path.join(dir, name));
}

function sniff(bytes) {
  if (bytes.length >= 8 && Buffer.from(bytes.subarray(0, 8)).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) return 'image/png';
  if (bytes.length >= 3 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return 'image/jpeg';
  return undefined;
}

/** An array of plain objects as aligned text columns (at most TABLE_MAX_ROWS rows), else undefined. */
function tableText(rows) {
  if (!Array.isArray(rows) || rows.length === 0 || !rows.every((r) => r !== null && typeof r === 'object' && !Array.isArray(r))) return undefined;
  const cols = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const shown = rows.slice(0, TABLE_MAX_ROWS).map((r) => cols.map((c) => (r[c] === undefined ? '' : String(r[c]))));
  const widths = cols.map((c, i) => Math.max(c.length, ...shown.map((r) => r[i].length)));
  const line = (cells) => cells.map((v, i) => v.padStart(widths[i])).join('  ');
  const more = rows.length > TABLE_MAX_ROWS ? `\n[${rows.length} rows x ${cols.length} columns]` : '';
  return [line(cols), ...shown.map(line)].join('\n') + more;
}

function displayOne(obj, mime) {
  if (mime !== undefined) {
    if (!EXT[mime]) throw new Error(`mime must be one of ${Object.keys(EXT).sort().join(', ')}`);
    write(EXT[mime], isBytes(obj) ? obj : String(obj));
    return;
  }
  if (isBytes(obj)) {
    const kind = sniff(obj);
    if (!kind) throw new Error('display(bytes) needs a PNG or JPEG (or pass { mime })');
    write(EXT[kind], obj);
    return;
  }
  const table = tableText(obj);
  if (table !== undefined) return write('.table', table);
  write('.txt', typeof obj === 'string' ? obj : util.inspect(obj));
}

/** Returns each object to the caller as an image, HTML or a table; the last argument may be { mime }. */
function display(...args) {
  const last = args[args.length - 1];
  const options = args.length > 1 && last !== null && typeof last === 'object' && !isBytes(last) && 'mime' in last ? args.pop() : {};
  for (const obj of args) displayOne(obj, options.mime);
}

module.exports = { display, tableText };
