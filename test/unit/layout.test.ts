// The folders of src/ are layers: no folder imports one that imports it back (directly or through
// others). A cycle means a behaviour sits in the wrong folder; the README's layout section says
// which folder owns what.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = join(import.meta.dirname, '../../src');

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? files(p) : p.endsWith('.ts') ? [p] : [];
  });
}

/** The top folder under src/ a file belongs to ('' for src/main.ts and src/operator.ts). */
function folderOf(file: string): string {
  const parts = relative(SRC, file).split('/');
  return parts.length > 1 ? (parts[0] ?? '') : '';
}

function folderGraph(): Map<string, Set<string>> {
  const graph = new Map<string, Set<string>>();
  for (const file of files(SRC)) {
    const from = folderOf(file);
    if (from === '') continue;
    for (const m of readFileSync(file, 'utf8').matchAll(/from '(\.[^']+)'/g)) {
      const to = folderOf(normalize(join(dirname(file), m[1] ?? '')));
      if (to !== '' && to !== from) graph.set(from, (graph.get(from) ?? new Set()).add(to));
    }
  }
  return graph;
}

/** Every cycle as a path a → … → a (each reported once, from its smallest folder name). */
function cycles(graph: Map<string, Set<string>>): string[] {
  const found: string[] = [];
  const walk = (start: string, at: string, path: string[]): void => {
    for (const next of graph.get(at) ?? []) {
      if (next === start) found.push([...path, start].join(' → '));
      else if (!path.includes(next) && next > start) walk(start, next, [...path, next]);
    }
  };
  for (const start of graph.keys()) walk(start, start, [start]);
  return found;
}

describe('src/ layout', () => {
  it('finds a cycle when there is one (the check itself)', () => {
    const g = new Map([
      ['a', new Set(['b'])],
      ['b', new Set(['c'])],
      ['c', new Set(['a'])],
    ]);
    expect(cycles(g)).toEqual(['a → b → c → a']);
  });

  it("matches the README's layout table, folder for folder", () => {
    const readme = readFileSync(join(SRC, '../README.md'), 'utf8');
    const table = readme.slice(readme.indexOf('Layout (folders are layers'));
    const named = new Set([...table.slice(0, table.indexOf('Outside `src/`')).matchAll(/`src\/([a-z-]+)`/g)].map((m) => m[1]));
    const folders = readdirSync(SRC).filter((f) => statSync(join(SRC, f)).isDirectory());
    expect([...named].sort()).toEqual(folders.sort());
  });

  it('has no import cycle between folders', () => {
    const graph = folderGraph();
    expect(graph.size).toBeGreaterThan(5);
    expect(cycles(graph)).toEqual([]);
  });
});
