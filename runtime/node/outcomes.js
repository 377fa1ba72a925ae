'use strict';
// The results of the last keyed `exec`s, kept for a client whose exec stream broke before the
// result arrived, or whose gateway replica stopped: it asks with `recall`, and a recall made while
// that call still goes on is answered when it ends (PROTOCOL.md, "Recall"; the Python kernel's
// Outcomes does the same). The last KEPT_RESULTS calls' results, fewer once their texts pass
// KEPT_CHARS (the oldest go first; the last always stays); a recall of one let go gets notFound.

const MAX_KEY_CHARS = 64;
// Recalls waiting for one call; more get KernelBusy (each waiter is a request of its own).
const MAX_RECALL_WAITERS = 16;
const KEPT_RESULTS = 16;
const KEPT_CHARS = 2_000_000;

/** What a kept result holds in text (its output and error texts). */
function resultChars(result) {
  const error = result.error || {};
  return [result.stdout, result.stderr, error.ename, error.evalue, error.traceback].reduce((n, t) => n + (t ? String(t).length : 0), 0);
}

/** Throws saying what is wrong with a request's `key` (optional: undefined or null is none). */
function checkKey(key) {
  if (key !== undefined && key !== null && (typeof key !== 'string' || key.length === 0 || key.length > MAX_KEY_CHARS)) {
    throw new Error(`"key" must be a string of 1 to ${MAX_KEY_CHARS} characters`);
  }
}

class Outcomes {
  /** `errorResult(ename, evalue)`: the kernel's error result shape. */
  constructor(errorResult) {
    this.errorResult = errorResult;
    this.running = null;
    this.done = new Map(); // key -> result, oldest first
    this.chars = 0;
    this.waiting = []; // { key, answer(result) }: recalls of the running call
  }

  started(key) {
    this.running = key ?? null;
    // A recall waits only for its own call: one still waiting for an earlier call (which ended
    // without finished(), a kernel fault) is told so, never given this call's result.
    const stale = this.waiting.filter((w) => w.key !== this.running);
    this.waiting = this.waiting.filter((w) => w.key === this.running);
    for (const w of stale) w.answer(this.errorResult('KernelError', `the call with key ${w.key} ended without a result`));
  }

  /** `result`: exactly as it was sent (capped). */
  finished(key, result) {
    this.running = null;
    if (key === undefined || key === null) return;
    this.keep(key, result);
    const waiting = this.waiting.filter((w) => w.key === key);
    this.waiting = this.waiting.filter((w) => w.key !== key);
    for (const w of waiting) w.answer(result);
  }

  keep(key, result) {
    if (this.done.has(key)) this.chars -= resultChars(this.done.get(key));
    this.done.delete(key);
    this.done.set(key, result);
    this.chars += resultChars(result);
    while (this.done.size > 1 && (this.done.size > KEPT_RESULTS || this.chars > KEPT_CHARS)) {
      const oldest = this.done.keys().next().value;
      this.chars -= resultChars(this.done.get(oldest));
      this.done.delete(oldest);
    }
  }

  /** Answers through `answer(result)`, now or when the call with `key` ends; true when it waits for that end. */
  recall(key, answer) {
    try {
      checkKey(key);
      if (key === undefined || key === null) throw new Error('"key" is required');
    } catch (err) {
      answer(this.errorResult('ProtocolError', err.message));
      return false;
    }
    if (this.done.has(key)) {
      answer(this.done.get(key));
      return false;
    }
    if (this.running === key) {
      if (this.waiting.length >= MAX_RECALL_WAITERS) {
        answer({ ...this.errorResult('KernelBusy', 'too many recalls are waiting for this call'), busy: true });
        return false;
      }
      this.waiting.push({ key, answer });
      return true;
    }
    answer({ ...this.errorResult('NotFound', `this kernel keeps no result with key ${key}`), notFound: true });
    return false;
  }
}

module.exports = { Outcomes, checkKey, MAX_KEY_CHARS };
