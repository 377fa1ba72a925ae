'use strict';
// The result of the last keyed `exec`, kept for a client whose exec stream broke before the
// result arrived: it asks with `recall`, and a recall made while that call still goes on is
// answered when it ends (PROTOCOL.md, "Recall"; the Python kernel's Outcomes does the same). One
// call's result only: a later keyed call replaces it, and a recall then gets notFound.

const MAX_KEY_CHARS = 64;
// Recalls waiting for one call; more get KernelBusy (each waiter is a request of its own).
const MAX_RECALL_WAITERS = 16;

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
    this.done = null; // { key, result }
    this.waiting = []; // (result) => void
  }

  started(key) {
    this.running = key ?? null;
  }

  /** `result`: exactly as it was sent (capped). */
  finished(key, result) {
    this.running = null;
    if (key === undefined || key === null) return;
    this.done = { key, result };
    const waiting = this.waiting;
    this.waiting = [];
    for (const answer of waiting) answer(result);
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
    if (this.done && this.done.key === key) {
      answer(this.done.result);
      return false;
    }
    if (this.running === key) {
      if (this.waiting.length >= MAX_RECALL_WAITERS) {
        answer({ ...this.errorResult('KernelBusy', 'too many recalls are waiting for this call'), busy: true });
        return false;
      }
      this.waiting.push(answer);
      return true;
    }
    answer({ ...this.errorResult('NotFound', `this kernel keeps no result with key ${key}`), notFound: true });
    return false;
  }
}

module.exports = { Outcomes, checkKey, MAX_KEY_CHARS };
