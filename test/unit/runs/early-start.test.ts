// A run started while its SandboxRun is being created (src/runs/early-start.ts): its output is held
// until the run exists and dropped if it never does; a failed create is judged by what the API has.
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { ANNOTATION_EXECUTOR, type SandboxRun } from '../../../src/api/v1alpha1/index.js';
import { MAX_HELD_OUTPUT_CHARS, confirmCreate, visibleOutput } from '../../../src/runs/early-start.js';
import type { OutputChunk } from '../../../src/runs/types.js';

const run = (executor: string, code = 'print(1)'): SandboxRun =>
  ({
    apiVersion: 'codemode.dev/v1alpha1',
    kind: 'SandboxRun',
    metadata: { name: 'sbr-1', namespace: 'ns', annotations: { [ANNOTATION_EXECUTOR]: executor } },
    spec: { language: 'python', code, timeoutSeconds: 30 },
  }) as SandboxRun;

function deferred<T>(): { promise: Promise<T>; resolve(v: T): void; reject(e: unknown): void } {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

const flush = (): Promise<void> => new Promise((r) => setImmediate(r));

function listen(output: EventEmitter): string[] {
  const seen: string[] = [];
  output.on('chunk', (c: OutputChunk) => seen.push(`${c.stream}:${c.text}`));
  return seen;
}

describe('output of a run started before it exists', () => {
  it('goes to subscribers at once for a run that exists', () => {
    const output = new EventEmitter();
    const seen = listen(output);
    visibleOutput(output, undefined)('stdout', 'a');
    expect(seen).toEqual(['stdout:a']);
  });

  it('is held until the create lands, then delivered in order, then streamed', async () => {
    const output = new EventEmitter();
    const seen = listen(output);
    const created = deferred<SandboxRun>();
    const emit = visibleOutput(output, { creating: created.promise });
    emit('stdout', 'a');
    emit('stderr', 'b');
    expect(seen).toEqual([]);
    created.resolve(run('me'));
    await flush();
    expect(seen).toEqual(['stdout:a', 'stderr:b']);
    emit('stdout', 'c');
    expect(seen).toEqual(['stdout:a', 'stderr:b', 'stdout:c']);
  });

  it('is never delivered when the create fails', async () => {
    const output = new EventEmitter();
    const seen = listen(output);
    const created = deferred<SandboxRun>();
    const emit = visibleOutput(output, { creating: created.promise });
    emit('stdout', 'secret');
    created.reject(new Error('quota'));
    await flush();
    emit('stdout', 'more');
    await flush();
    expect(seen).toEqual([]);
  });

  it('holds at most MAX_HELD_OUTPUT_CHARS (a flood before the create lands is cut, not buffered)', async () => {
    const output = new EventEmitter();
    const seen = listen(output);
    const created = deferred<SandboxRun>();
    const emit = visibleOutput(output, { creating: created.promise });
    const chunk = 'x'.repeat(64 * 1024);
    for (let i = 0; i < 100; i++) emit('stdout', chunk);
    created.resolve(run('me'));
    await flush();
    expect(seen.length).toBe(MAX_HELD_OUTPUT_CHARS / chunk.length);
  });
});

describe('a failed create of a run that may have started', () => {
  const apiError = (code: number): Error => Object.assign(new Error(`HTTP ${code}`), { code });
  const noPause = (): Promise<void> => Promise.resolve();

  it.each<[string, unknown, () => Promise<SandboxRun | undefined>, 'run' | 'absent' | 'unknown', number]>([
    ['refused as invalid: nothing written, nothing read', apiError(422), () => Promise.resolve(run('me')), 'absent', 0],
    ['refused by a quota (403)', apiError(403), () => Promise.resolve(run('me')), 'absent', 0],
    ['a name someone else took (409)', apiError(409), () => Promise.resolve(run('other')), 'absent', 0],
    ['a lost answer, the run is there: it is ours', new Error('socket hang up'), () => Promise.resolve(run('me')), 'run', 1],
    ['a server error, the run is not there', apiError(500), () => Promise.resolve(undefined), 'absent', 1],
    ['a timeout (408), a run of that name with other code', apiError(408), () => Promise.resolve(run('me', 'print(2)')), 'absent', 1],
    ['throttled (429), a run of another executor', apiError(429), () => Promise.resolve(run('other')), 'absent', 1],
    ['the API cannot be read at all', new Error('ECONNREFUSED'), () => Promise.reject(new Error('ECONNREFUSED')), 'unknown', 3],
  ])('%s', async (_name, err, reply, want, reads) => {
    let n = 0;
    const got = await confirmCreate(
      run('me'),
      err,
      () => {
        n++;
        return reply();
      },
      'ns',
      noPause,
    );
    expect(typeof got === 'string' ? got : 'run').toBe(want);
    expect(n).toBe(reads);
  });

  it('reads again after a failed read, and takes the run it then finds', async () => {
    const replies = [Promise.reject(new Error('EOF')), Promise.resolve(run('me'))];
    const got = await confirmCreate(
      run('me'),
      new Error('EOF'),
      () => replies.shift() ?? Promise.resolve(undefined),
      'ns',
      () => Promise.resolve(),
    );
    expect(got).toMatchObject({ metadata: { name: 'sbr-1' } });
  });
});
