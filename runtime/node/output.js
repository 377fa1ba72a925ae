'use strict';
// Output of a call: capped capture plus coalesced `output` frames (same rules as the Python
// kernel's output.py). Frames carry exactly the kept text, so streaming is capped like the result.
const { StringDecoder } = require('node:string_decoder');

const FLUSH_INTERVAL_MS = 20;
const FLUSH_CHARS = 16 * 1024;

/**
 * The first `cap` characters of text counted as code points, like the Python kernel (a surrogate
 * pair is one character and is never split), and how many characters that prefix has.
 */
function cutChars(text, cap) {
  let i = 0;
  let n = 0;
  for (; n < cap && i < text.length; n++) i += text.codePointAt(i) > 0xffff ? 2 : 1;
  return [text.slice(0, i), n];
}

/** Code points of s up to cap (never splits a surrogate pair). */
function capChars(s, cap) {
  const text = String(s);
  return text.length <= cap ? text : cutChars(text, cap)[0];
}

class StreamCapture {
  constructor(cap) {
    this.cap = Math.max(0, cap);
    this.bytes = 0;
    this.chars = 0; // of `kept`, in code points
    this.truncated = false;
    this.kept = '';
    this.pending = '';
    this.decoder = new StringDecoder('utf8');
  }

  /** `chunk`: a string or a Buffer. */
  write(chunk) {
    const isText = typeof chunk === 'string';
    this.bytes += isText ? Buffer.byteLength(chunk) : chunk.byteLength;
    if (this.truncated) return;
    const room = this.cap - this.chars;
    // Slicing before decoding bounds the work for huge chunks; a character is at most 2 UTF-16
    // units or 4 bytes, so one more than fits is still seen.
    const text = isText ? chunk.slice(0, 2 * room + 2) : this.decoder.write(chunk.subarray(0, 4 * room + 4));
    this.keep(text);
  }

  finish() {
    if (!this.truncated) this.keep(this.decoder.end());
  }

  keep(text) {
    const [kept, chars] = cutChars(text, this.cap - this.chars);
    if (kept.length < text.length) this.truncated = true;
    this.chars += chars;
    text = kept;
    this.kept += text;
    this.pending += text;
  }

  takePending() {
    const text = this.pending;
    this.pending = '';
    return text;
  }
}

class CallOutput {
  constructor(id, cap, send) {
    this.id = id;
    this.send = send;
    this.streams = { stdout: new StreamCapture(cap), stderr: new StreamCapture(cap) };
    this.lastFlush = Date.now();
    this.timer = undefined;
  }

  write(stream, chunk) {
    this.streams[stream].write(chunk);
    const pending = this.streams.stdout.pending.length + this.streams.stderr.pending.length;
    if (pending >= FLUSH_CHARS) this.flush();
    else if (pending > 0 && !this.timer) {
      const wait = Math.max(0, this.lastFlush + FLUSH_INTERVAL_MS - Date.now());
      this.timer = setTimeout(() => this.flush(), wait);
    }
  }

  flush() {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.lastFlush = Date.now();
    for (const name of ['stdout', 'stderr']) {
      const text = this.streams[name].takePending();
      if (text) this.send({ id: this.id, type: 'output', stream: name, text });
    }
  }

  finish() {
    this.streams.stdout.finish();
    this.streams.stderr.finish();
    this.flush();
  }

  resultFields() {
    const { stdout, stderr } = this.streams;
    return {
      stdout: stdout.kept,
      stderr: stderr.kept,
      stdoutBytes: stdout.bytes,
      stderrBytes: stderr.bytes,
      truncated: stdout.truncated || stderr.truncated,
    };
  }
}

module.exports = { CallOutput, capChars };
