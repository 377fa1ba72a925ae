// client-node's ObjectSerializer (gen/models/ObjectSerializer.js), which every request factory
// imports, statically imports all of its ~760 model classes for one lookup table (typeMap, type
// name → class) and re-exports them: ~23 MB of memory (docs/performance.md, Memory), of which a
// gateway uses the few dozen its calls (de)serialize. lazyModelsSource rewrites that file's source
// so that each typeMap entry loads its model file on first lookup (require of an ES module, which
// shares the module cache, so the class is the same one a static import gives). Same classes, same
// lookups, same results; only the loading is deferred. The rewrite checks the shape it expects and
// returns undefined for anything else, and the caller then keeps the original source.

const MODEL_IMPORT = /^import \{ ([A-Za-z_$][\w$]*) \} from '(\.\.\/models\/[\w.-]+\.js)';$/;
const MODEL_REEXPORT = /^export \* from '\.\.\/models\/[\w.-]+\.js';$/;
const TYPEMAP_OPEN = 'let typeMap = {';
const TYPEMAP_ENTRY = /^\s*"([\w.$-]+)": ([A-Za-z_$][\w$]*),$/;
const TYPEMAP_CLOSE = '};';

/** What the rewrite took out: the model files by typeMap key, and how many re-exports it dropped. */
export interface LazyModels {
  source: string;
  models: Map<string, { file: string; name: string }>;
  reexports: number;
}

/** The helper the rewritten module defines: typeMap entries as getters that load on first use. */
function helperSource(requireBase: string): string {
  return [
    'function __codemodeLazyModels(files) {',
    `  const load = __codemodeCreateRequire(${JSON.stringify(requireBase)});`,
    '  const map = {};',
    '  for (const [key, [file, name]] of Object.entries(files)) {',
    '    Object.defineProperty(map, key, {',
    '      configurable: true,',
    '      enumerable: true,',
    '      get() {',
    '        const value = load(file)[name];',
    '        Object.defineProperty(map, key, { value, writable: true, enumerable: true, configurable: true });',
    '        return value;',
    '      },',
    '    });',
    '  }',
    '  return map;',
    '}',
  ].join('\n');
}

/**
 * The ObjectSerializer module's source with its model imports and re-exports removed and typeMap
 * built from lazy entries; `requireBase` is the URL the model paths are relative to (the original
 * module's). Undefined when the source is not shaped as expected (a client-node update).
 */
export function lazyModelsSource(source: string, requireBase: string): LazyModels | undefined {
  const imports = new Map<string, string>();
  const kept: string[] = [];
  let reexports = 0;
  const lines = source.split('\n');
  let i = 0;
  for (; i < lines.length; i++) {
    const line = lines[i] ?? '';
    if (line === TYPEMAP_OPEN) break;
    const imp = MODEL_IMPORT.exec(line);
    if (imp?.[1] && imp[2]) imports.set(imp[1], imp[2]);
    else if (MODEL_REEXPORT.test(line)) reexports++;
    else kept.push(line);
  }
  if (i >= lines.length || imports.size === 0) return undefined;
  const models = new Map<string, { file: string; name: string }>();
  for (i++; i < lines.length && lines[i] !== TYPEMAP_CLOSE; i++) {
    const entry = TYPEMAP_ENTRY.exec(lines[i] ?? '');
    const file = entry?.[2] === undefined ? undefined : imports.get(entry[2]);
    if (!entry?.[1] || !entry[2] || file === undefined) return undefined;
    models.set(entry[1], { file, name: entry[2] });
  }
  if (i >= lines.length || models.size !== imports.size) return undefined;
  const rest = lines.slice(i + 1);
  // Nothing else in the module may use a model class by name: those names are no longer bound.
  const used = new Set(`${kept.join('\n')}\n${rest.join('\n')}`.match(/[A-Za-z_$][\w$]*/g));
  for (const name of imports.keys()) if (used.has(name)) return undefined;
  const files = Object.fromEntries([...models].map(([key, m]) => [key, [m.file, m.name]]));
  const out = [
    "import { createRequire as __codemodeCreateRequire } from 'node:module';",
    ...kept,
    `let typeMap = __codemodeLazyModels(${JSON.stringify(files)});`,
    helperSource(requireBase),
    ...rest,
  ];
  return { source: out.join('\n'), models, reexports };
}

const SERIALIZER_MODULE = '/@kubernetes/client-node/dist/gen/models/ObjectSerializer.js';

/** True for client-node's ObjectSerializer module, the one lazyModelsSource rewrites. */
export function isObjectSerializerModule(url: string): boolean {
  return url.startsWith('file:') && url.endsWith(SERIALIZER_MODULE);
}
