// client-node's request factories (gen/apis/<Group>Api.js) are generated with a doc comment and
// step comments around every method: ~47% of their source (CoreV1Api.js: 0.73 of 1.55 MB). V8
// keeps a module's whole source in memory for as long as the module lives (it compiles functions
// lazily, from the source), so the gateway held ~1.3 MB of comments. withoutCommentLines blanks
// the lines that are only a comment, keeping every line (stack traces still point at the file's
// lines) and every line of code as it is; the resolve hook in slim-load.ts applies it to those
// files. Comments sharing a line with code stay. Anything unexpected keeps the original source.

const API_MODULE = /\/@kubernetes\/client-node\/dist\/gen\/apis\/[A-Za-z0-9]+Api\.js$/;

/** True for one of client-node's generated request factory modules. */
export function isApiModule(url: string): boolean {
  return url.startsWith('file:') && API_MODULE.test(url);
}

/**
 * The source with every whole-line `// …` comment and every `/** … *\/` block whose lines are
 * only comment (opening line `/**`, inner lines starting with `*`, closing line `*\/`) blanked.
 * Undefined if a block does not look so (the caller keeps the original) or the source has
 * template literals or line continuations (a line inside a string could look like a comment).
 */
export function withoutCommentLines(source: string): string | undefined {
  if (source.includes('`') || /\\\r?\n/.test(source)) return undefined;
  const lines = source.split('\n');
  let inBlock = false;
  for (let i = 0; i < lines.length; i++) {
    const t = (lines[i] ?? '').trim();
    if (inBlock) {
      if (!t.startsWith('*') || (t !== '*/' && t.includes('*/'))) return undefined;
      if (t === '*/') inBlock = false;
      lines[i] = '';
    } else if (t === '/**') {
      inBlock = true;
      lines[i] = '';
    } else if (t.startsWith('//') && !t.startsWith('//# sourceMappingURL=')) {
      lines[i] = '';
    }
  }
  return inBlock ? undefined : lines.join('\n');
}
