'use strict';
// A small JavaScript scanner: just enough to find top-level statements, without a parser
// (the kernel has no npm dependencies). It skips strings, template literals, comments and regex
// literals and tracks bracket depth. Its answers are hints: every rewrite built from them is
// compiled before use, and the kernel falls back to the code as written when that fails.

const VALUE_END = new Set(['ident', 'num', 'str', ')', ']', '}']);
// After these words a `/` starts a regex, not a division.
const REGEX_AFTER = new Set(['return', 'typeof', 'instanceof', 'in', 'of', 'new', 'delete', 'void', 'throw', 'case', 'do', 'else', 'yield', 'await']);
const IDENT_START = /[A-Za-z_$\u0080-\uffff]/;
const IDENT_PART = /[\w$\u0080-\uffff]/;

/**
 * Returns { starts, decls, last } or null when the code is not well formed:
 *   starts: offsets where a top-level statement may begin (start of code, after `;`, after a
 *           top-level `}`, or on a new line: automatic semicolon insertion makes any new line a
 *           candidate),
 *   decls:  top-level `let`/`const` declarations at a statement start, as { pos, kw }, and
 *           top-level `class` declarations as { pos, kw: 'class', name, end } (end: the offset
 *           of the `}` that closes the class body: its first `{` at top level),
 *   last:   offset of the last significant character.
 */
function scan(code) {
  const starts = [];
  const decls = [];
  const templates = []; // depth at which each open `${` of a template literal began
  let depth = 0;
  let atStart = true;
  let prev = '';
  let last = -1;
  let klass = null; // the class declaration being scanned: its body's `{` is the next at depth 0
  let i = 0;
  while (i < code.length) {
    const c = code[i];
    if (c === '\n' || c === '\r' || c === '\u2028' || c === '\u2029') {
      if (depth === 0) atStart = true;
      i++;
      continue;
    }
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    if (c === '/' && code[i + 1] === '/') {
      const nl = code.indexOf('\n', i);
      i = nl < 0 ? code.length : nl;
      continue;
    }
    if (c === '/' && code[i + 1] === '*') {
      const end = code.indexOf('*/', i + 2);
      if (end < 0) return null;
      if (depth === 0 && /[\n\r\u2028\u2029]/.test(code.slice(i, end))) atStart = true;
      i = end + 2;
      continue;
    }
    const statementStart = atStart && depth === 0;
    if (statementStart) starts.push(i);
    atStart = false;
    last = i;
    if (c === '"' || c === "'") {
      i = skipString(code, i);
      prev = 'str';
    } else if (c === '`') {
      [i, depth] = skipTemplate(code, i + 1, templates, depth);
      prev = 'str';
    } else if (c === '/' && (statementStart || !VALUE_END.has(prev))) {
      i = skipRegex(code, i);
      prev = 'str';
    } else if (IDENT_START.test(c)) {
      let j = i + 1;
      while (j < code.length && IDENT_PART.test(code[j])) j++;
      const word = code.slice(i, j);
      if (statementStart && (word === 'let' || word === 'const') && /^\s+[A-Za-z_$[{\u0080-\uffff]/.test(code.slice(j, j + 64))) {
        decls.push({ pos: i, kw: word });
      }
      const named = statementStart && word === 'class' && /^\s+([A-Za-z_$\u0080-\uffff][\w$\u0080-\uffff]*)/.exec(code.slice(j, j + 256));
      if (named && named[1] !== 'extends') klass = { pos: i, kw: word, name: named[1], body: false };
      prev = REGEX_AFTER.has(word) ? 'op' : 'ident';
      i = j;
    } else if (/\d/.test(c) || (c === '.' && /\d/.test(code[i + 1] || ''))) {
      let j = i + 1;
      while (j < code.length && (/[\w.]/.test(code[j]) || (/[+-]/.test(code[j]) && /[eE]/.test(code[j - 1]) && !/^0[xX]/.test(code.slice(i, j))))) j++;
      prev = 'num';
      i = j;
    } else if (c === '(' || c === '[' || c === '{') {
      if (c === '{' && depth === 0 && klass) klass.body = true;
      depth++;
      prev = 'op';
      i++;
    } else if (c === ')' || c === ']') {
      depth--;
      prev = ')';
      i++;
    } else if (c === '}') {
      depth--;
      i++;
      if (templates.length > 0 && templates[templates.length - 1] === depth) {
        // End of a `${...}` substitution: the template literal continues.
        templates.pop();
        [i, depth] = skipTemplate(code, i, templates, depth);
        prev = 'str';
      } else {
        prev = '}';
        if (depth === 0) atStart = true;
        if (depth === 0 && klass && klass.body) {
          decls.push({ pos: klass.pos, kw: klass.kw, name: klass.name, end: i - 1 });
          klass = null;
        }
      }
    } else {
      if (c === ';' && depth === 0) atStart = true;
      prev = 'op';
      i++;
    }
    if (i < 0 || depth < 0) return null;
  }
  return depth === 0 && templates.length === 0 ? { starts, decls, last } : null;
}

function skipString(code, i) {
  const quote = code[i];
  for (let j = i + 1; j < code.length; j++) {
    if (code[j] === '\\') j++;
    else if (code[j] === quote) return j + 1;
    else if (code[j] === '\n') return -1;
  }
  return -1;
}

/**
 * From inside a template literal to past its closing backquote, or past a `${`: then the
 * substitution is scanned as code one level deeper, and its `}` resumes the template.
 * Returns [position or -1, depth].
 */
function skipTemplate(code, i, templates, depth) {
  for (let j = i; j < code.length; j++) {
    if (code[j] === '\\') j++;
    else if (code[j] === '`') return [j + 1, depth];
    else if (code[j] === '$' && code[j + 1] === '{') {
      templates.push(depth);
      return [j + 2, depth + 1];
    }
  }
  return [-1, depth];
}

function skipRegex(code, i) {
  let inClass = false;
  for (let j = i + 1; j < code.length; j++) {
    const c = code[j];
    if (c === '\\') j++;
    else if (c === '\n') return -1;
    else if (c === '[') inClass = true;
    else if (c === ']') inClass = false;
    else if (c === '/' && !inClass) {
      j++;
      while (j < code.length && IDENT_PART.test(code[j])) j++;
      return j;
    }
  }
  return -1;
}

module.exports = { scan };
