// The Node session kernel (runtime/node), through its relay.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSession, type RelayClient, type ResultFrame } from './harness.js';

describe('node kernel', () => {
  let session: Awaited<ReturnType<typeof startSession>>;
  let client: RelayClient;
  beforeAll(async () => {
    session = await startSession('node');
    client = session.client;
  });
  afterAll(() => session.stop());

  it('answers ping', async () => {
    expect((await client.ping()).frame).toMatchObject({ type: 'pong', language: 'node', busy: false });
  });

  it('keeps var, let, const, functions and classes across calls', async () => {
    await client.exec('var a = 1\nlet b = 2\nconst c = 3\nfunction add(x, y) { return x + y }\nclass Box { constructor(v) { this.v = v } }');
    expect((await client.exec('add(a, b) + c + new Box(4).v')).frame).toMatchObject({ status: 'ok', result: '10' });
  });

  it('lets a later call declare the same let/const again', async () => {
    expect((await client.exec('const c = 30; let b = 20; c + b')).frame).toMatchObject({ status: 'ok', result: '50' });
    expect((await client.exec('c')).frame.result).toBe('30');
  });

  // The let/const rewrite must leave strings, templates, regexes, comments and blocks alone.
  it.each([
    ['a string mentioning const', "const s1 = 'const x = 1; {'; s1.length", '14'],
    ['a template with a substitution', 'const t1 = `a ${ { v: 1 }.v } const`\nt1', "'a 1 const'"],
    ['a regex with quotes and braces', 'const r1 = /["{]const/\nr1.test(\'"const\')', 'true'],
    ['a comment', '/* const c1 = 1 */ const c2 = 2 // const c3\nc2', '2'],
    ['a block-scoped const', 'const outer = 1\n{ const inner = 2 }\ntypeof inner', "'undefined'"],
    ['a for loop let', 'let n1 = 0\nfor (let i = 0; i < 3; i++) n1 += i\nn1', '3'],
  ])('runs code with %s and can run it again', async (_name, code, expected) => {
    expect((await client.exec(code)).frame).toMatchObject({ status: 'ok', result: expected });
    expect((await client.exec(code)).frame).toMatchObject({ status: 'ok', result: expected });
  });

  // A top-level class is a `var` like let/const: one whose definition threw can be defined again.
  it.each([
    [
      'extends a name not defined yet',
      'class B1 extends NotYet1 {}',
      'var NotYet1 = class {}\nclass B1 extends NotYet1 { v() { return 2 } }\nnew B1().v()',
      '2',
    ],
    ['a static block that throws', "class E1 { static { throw new Error('boom') } }", 'typeof E1', "'undefined'"],
    ['a later definition of the same name', 'class C1 { v() { return 1 } }', 'class C1 { v() { return 2 } }\n[new C1().v(), 3].length', '2'],
  ])('redefines a class after %s', async (_name, first, second, expected) => {
    await client.exec(first);
    expect((await client.exec(second)).frame).toMatchObject({ status: 'ok', result: expected });
  });

  it.each([
    ['a number', '1 + 2', '3'],
    ['a string (inspected)', "'x'.repeat(3)", "'xxx'"],
    ['an object', '({ k: [1, 2] })', '{ k: [ 1, 2 ] }'],
    ['undefined (no result)', 'undefined', undefined],
    ['a declaration (no result)', 'var q = 1', undefined],
  ])('returns the last expression value: %s', async (_name, code, expected) => {
    const { frame } = await client.exec(code);
    expect(frame.status).toBe('ok');
    expect(frame.result).toBe(expected);
  });

  it('captures console and process.stdout per call', async () => {
    const { frame } = await client.exec("console.log('hi', { a: 1 }); console.error('oops'); process.stdout.write('raw')");
    expect(frame).toMatchObject({ stdout: 'hi { a: 1 }\nraw', stderr: 'oops\n' });
    expect((await client.exec("console.log('next')")).frame).toMatchObject({ stdout: 'next\n', stderr: '' });
  });

  // A chunk Node's streams refuse is refused the same way, in the code that wrote it; views are their bytes.
  it.each([
    ['a number to stdout', 'process.stdout.write(42)'],
    ['an object to stderr', 'process.stderr.write({})'],
    ['null to stdout', 'process.stdout.write(null)'],
  ])('throws ERR_INVALID_ARG_TYPE for %s and keeps the byte counts numbers', async (_name, code) => {
    const { frame } = await client.exec(`try { ${code} } catch (e) { e.code }`);
    expect(frame).toMatchObject({ status: 'ok', result: "'ERR_INVALID_ARG_TYPE'", stdoutBytes: 0, stderrBytes: 0 });
  });

  it.each([
    ['a DataView', "const b1 = Buffer.from('xhéy'); process.stdout.write(new DataView(b1.buffer, b1.byteOffset + 1, 3))", 'hé', 3],
    ['a Uint16Array', 'process.stdout.write(new Uint16Array([0x6968, 0x0a21]))', 'hi!\n', 4],
    ['a Uint8Array slice', 'process.stdout.write(new Uint8Array([0x61, 0x62, 0x63, 0x64]).subarray(1, 3))', 'bc', 2],
  ])('writes the bytes of %s', async (_name, code, text, bytes) => {
    const { frame } = await client.exec(code);
    expect(frame).toMatchObject({ status: 'ok', stdout: text, stdoutBytes: bytes });
  });

  // capChars counts code points like the Python kernel: a surrogate pair is kept whole or not at all.
  it.each([
    ['a result', "'\\u{1F600}'.repeat(10)", { capChars: 4 }, (f: ResultFrame) => f.result, "'😀😀😀"],
    ['stdout written as one string', "process.stdout.write('a\\u{1F600}'.repeat(10))", { capChars: 5 }, (f: ResultFrame) => f.stdout, 'a😀a😀a'],
    ['stdout written as bytes', "process.stdout.write(Buffer.from('\\u{1F600}'.repeat(10)))", { capChars: 3 }, (f: ResultFrame) => f.stdout, '😀😀😀'],
    ['stderr written in pieces', "for (let i = 0; i < 10; i++) process.stderr.write('\\u{1F600}')", { capChars: 3 }, (f: ResultFrame) => f.stderr, '😀😀😀'],
  ])('cuts %s on code points, never in a surrogate pair', async (_name, code, options, text, expected) => {
    const { frame, outputs } = await client.exec(code, options);
    expect(text(frame)).toBe(expected);
    expect(frame.truncated).toBe(true);
    // The output frames carry exactly the kept text.
    if (_name !== 'a result') expect(outputs.map((o) => o.text).join('')).toBe(expected);
  });

  it.each([
    ['a patched method', "console.log = () => process.stdout.write('patched\\n')", "console.log('plain')", 'plain\n'],
    ['an added property', 'console.extra = 1', 'console.log(typeof console.extra)', 'undefined\n'],
  ])('gives a reset session a fresh console (%s)', async (_name, patch, check, stdout) => {
    await client.exec(patch);
    expect((await client.request({ op: 'reset' })).frame).toMatchObject({ status: 'ok' });
    expect((await client.exec(check)).frame).toMatchObject({ status: 'ok', stdout });
    await client.exec('var a = 1');
  });

  // require resolves relative names from the working directory of the call, after process.chdir too.
  it.each([
    ['require', "require('./cwd-mod.js').where", "'moved'"],
    ['require.resolve', "require.resolve('./cwd-mod.js') === require('path').join(process.cwd(), 'cwd-mod.js')", 'true'],
    ['require.cache', "require('./cwd-mod.js'); require.cache[require.resolve('./cwd-mod.js')].exports.where", "'moved'"],
  ])('resolves %s from process.cwd() after process.chdir', async (_name, code, expected) => {
    const dir = mkdtempSync(join(tmpdir(), 'kernel-cwd-'));
    writeFileSync(join(dir, 'cwd-mod.js'), "module.exports = { where: 'moved' }\n");
    const run = `const back = process.cwd(); process.chdir(${JSON.stringify(dir)})\ntry { ${code} } finally { process.chdir(back) }`;
    expect((await client.exec(run)).frame).toMatchObject({ status: 'ok', result: expected });
  });

  it('reports an exception with the failing line', async () => {
    const { frame } = await client.exec("function fail() {\n  throw new TypeError('bad input')\n}\nfail()");
    expect(frame.status).toBe('error');
    expect(frame.error).toMatchObject({ ename: 'TypeError', evalue: 'bad input' });
    expect(frame.error?.traceback).toContain("throw new TypeError('bad input')");
    expect(frame.error?.traceback).toMatch(/at fail \(cell-\d+:2:9\)/);
    expect(frame.error?.traceback).not.toContain('runtime/node');
  });

  // Any thrown value is reported as the code's own error, and the call always gets its result.
  it.each([
    ['a stack getter that throws', "throw { get stack() { throw new Error('getter') } }", { ename: 'Uncaught', evalue: '{ stack: [Getter] }' }],
    [
      'a message getter that throws',
      "const e1 = new Error('x'); Object.defineProperty(e1, 'message', { get() { throw new Error('getter') } }); throw e1",
      { ename: 'Error', evalue: '' },
    ],
    [
      'a null-prototype message',
      "const e2 = new Error('x'); e2.message = Object.create(null); throw e2",
      { ename: 'Error', evalue: '[Object: null prototype] {}' },
    ],
    ['a null-prototype name', "throw { stack: 'Error: x', name: Object.create(null), message: 'm' }", { ename: '[Object: null prototype] {}', evalue: 'm' }],
    ['a Proxy whose traps throw', 'throw new Proxy({}, { get() { throw 1 }, getPrototypeOf() { throw 2 } })', { ename: 'Uncaught' }],
  ])('reports a thrown value with %s', async (_name, code, error) => {
    const { frame } = await client.exec(code, { key: `thrown-${_name}` });
    expect(frame).toMatchObject({ status: 'error', error });
    expect((await client.request({ op: 'recall', key: `thrown-${_name}` })).frame).toMatchObject({ status: 'error', error });
    expect((await client.exec('1 + 1')).frame.result).toBe('2');
  });

  it('survives an uncaught error whose message cannot be printed', async () => {
    const code =
      "setTimeout(() => { const e = new Error('x'); e.message = Object.create(null); throw e }, 10)\nawait new Promise((r) => setTimeout(r, 200))\n'after'";
    const { frame } = await client.exec(code);
    expect(frame).toMatchObject({ status: 'ok', result: "'after'" });
    expect(frame.stderr).toContain('Uncaught Error: [Object: null prototype] {}');
    expect((await client.exec('1 + 1')).frame.result).toBe('2');
  });

  it('answers a waiting recall with its own call, not the next one', async () => {
    const odd = "await new Promise((r) => setTimeout(r, 300)); throw { stack: 'Error: x', name: Object.create(null), message: 'm' }";
    const first = client.exec(odd, { key: 'odd-a' });
    await new Promise((r) => setTimeout(r, 100));
    const recalled = client.request({ op: 'recall', key: 'odd-a' });
    const early = await Promise.race([recalled, new Promise((r) => setTimeout(() => r('no answer'), 3000))]);
    expect(early).toMatchObject({ frame: { status: 'error', error: { evalue: 'm' } } });
    expect((await first).frame).toMatchObject({ status: 'error', error: { evalue: 'm' } });
    expect((await client.exec("'b'", { key: 'odd-b' })).frame.result).toBe("'b'");
  });

  // The last expression of an await call is read as JavaScript reads it, across lines, and gives
  // what the same code gives without await.
  it.each([
    ['an expression continued on the next lines', 's', '{ a: 10, b: 20, c: 30 }', 's.a\n  + s.b\n  + s.c', '60'],
    ['an index on the next line', 'xs', '[5, 6]', 'xs\n  [1]', '6'],
    ['statements on their own lines', 'v', '1', 'v + 1\nv + 2', '3'],
    ['two expressions on one line', 'w', '2', 'w; w * 3', '6'],
  ])('returns the last expression of an await call: %s', async (_name, name, value, rest, expected) => {
    const awaited = `const ${name} = await Promise.resolve(${value})\n${rest}`;
    expect((await client.exec(awaited)).frame).toMatchObject({ status: 'ok', result: expected });
    expect((await client.exec(`const ${name} = ${value}\n${rest}`)).frame).toMatchObject({ status: 'ok', result: expected });
  });

  it('supports top-level await, returning the last expression', async () => {
    const { frame } = await client.exec('await new Promise((r) => setTimeout(r, 10))\nconst local = 21\nlocal * 2;');
    expect(frame).toMatchObject({ status: 'ok', result: '42' });
    // Declarations in an await call are local to it; assignments without a keyword persist.
    await client.exec('kept = await Promise.resolve(5)');
    expect((await client.exec('[typeof local, kept]')).frame.result).toBe("[ 'undefined', 5 ]");
  });

  it('streams console output of async code while it runs', async () => {
    const { frame, outputs, at } = await client.exec('for (let i = 0; i < 4; i++) { console.log(i); await new Promise((r) => setTimeout(r, 100)) }');
    expect(frame.stdout).toBe('0\n1\n2\n3\n');
    expect(at - (outputs[0]?.at ?? at)).toBeGreaterThan(200);
  });

  it('feeds stdin to process.stdin', async () => {
    const code = "let s = ''\nfor await (const chunk of process.stdin) s += chunk\ns";
    expect((await client.exec(code, { stdin: 'abc' })).frame.result).toBe("'abc'");
  });

  it('does not end the kernel on process.exit', async () => {
    expect((await client.exec('process.exit(2)')).frame).toMatchObject({ status: 'error', error: { ename: 'ProcessExit' } });
    expect((await client.exec('a')).frame.result).toBe('1');
  });

  // process.exit ends the call wherever it is called from, as at top level.
  it.each([
    [
      'a timer, code 0',
      "await new Promise(() => setTimeout(() => { console.log('done'); process.exit(0) }, 20)); 'unreached'",
      { status: 'ok', stdout: 'done\n', stderr: '' },
    ],
    [
      'a timer, code 3',
      'await new Promise(() => setTimeout(() => process.exit(3), 20))',
      { status: 'error', error: { ename: 'ProcessExit', evalue: 'process.exit(3) was called' } },
    ],
    [
      'an event',
      "const ee = new (require('events'))(); ee.on('go', () => process.exit(2)); setTimeout(() => ee.emit('go'), 20); await new Promise(() => {})",
      { status: 'error', error: { ename: 'ProcessExit', evalue: 'process.exit(2) was called' } },
    ],
    [
      'a promise callback',
      'await new Promise(() => { Promise.resolve().then(() => process.exit(4)) })',
      { status: 'error', error: { ename: 'ProcessExit', evalue: 'process.exit(4) was called' } },
    ],
    ['an async timer callback', 'setTimeout(async () => { await null; process.exit() }, 20); await new Promise(() => {})', { status: 'ok', stderr: '' }],
    [
      'top level, after process.exitCode',
      'process.exitCode = 4; process.exit()',
      { status: 'error', error: { ename: 'ProcessExit', evalue: 'process.exit() was called with process.exitCode 4' } },
    ],
    [
      'top level, caught',
      "try { process.exit(6) } catch {}\n'went on'",
      { status: 'error', error: { ename: 'ProcessExit', evalue: 'process.exit(6) was called' } },
    ],
  ])('ends the call on process.exit in %s', async (_name, code, expected) => {
    const { frame } = await client.exec(code, { timeoutMs: 5000 });
    expect(frame).toMatchObject(expected);
    expect(frame.result).toBeUndefined();
    // The exit code a call set does not carry over to the next call.
    expect((await client.exec('process.exit()')).frame).toMatchObject({ status: 'ok' });
  });

  it.each([
    ['a synchronous loop', 'while (true) {}'],
    ['a pending promise', 'await new Promise(() => {})'],
    ['a blocking child process', "require('child_process').execSync('sleep 100')"],
  ])('times out %s and keeps the session', async (_name, code) => {
    const { frame } = await client.exec(code, { timeoutMs: 300 });
    expect(frame.status).toBe('timeout');
    // Stopped at the timeout, not run to its end (the child process would sleep 100 s).
    expect(frame.durationMs).toBeLessThan(60_000);
    expect((await client.exec('a + 1')).frame.result).toBe('2');
  });
});

describe('node kernel with two relays', () => {
  it('shares state, answers busy during a call, and resets on request', async () => {
    const { kernel, client, stop } = await startSession('node');
    const other = await kernel.connect();
    try {
      await client.exec('shared = 1');
      expect((await other.exec('shared + 1')).frame.result).toBe('2');
      // The call runs until the test releases it, so "busy" is seen however loaded the machine is.
      const release = join(mkdtempSync(join(tmpdir(), 'kernel-busy-')), 'release');
      const running = client.exec(
        `const fs = require('fs'); while (!fs.existsSync(${JSON.stringify(release)})) await new Promise((r) => setTimeout(r, 10)); 'done'`,
      );
      let busy: ResultFrame | undefined;
      for (let i = 0; i < 500 && busy === undefined; i++) {
        const { frame } = await other.exec('1');
        if (frame.status === 'error') busy = frame;
        else await new Promise((r) => setTimeout(r, 10));
      }
      expect(busy).toMatchObject({ status: 'error', busy: true, error: { ename: 'KernelBusy' } });
      writeFileSync(release, '');
      expect((await running).frame.result).toBe("'done'");
      expect((await other.request({ op: 'reset' })).frame).toMatchObject({ status: 'ok' });
      // The code's own exception of that name ran: it is not "busy".
      const own = (await client.exec("class KernelBusy extends Error { name = 'KernelBusy' }; throw new KernelBusy('mine')")).frame;
      expect(own).toMatchObject({ status: 'error', error: { ename: 'KernelBusy' } });
      expect(own.busy).toBeUndefined();
      expect((await client.exec('typeof shared')).frame.result).toBe("'undefined'");
    } finally {
      await other.close();
      await stop();
    }
  });
});

describe('node kernel running code of the session after the cell', () => {
  let session: Awaited<ReturnType<typeof startSession>>;
  beforeAll(async () => {
    session = await startSession('node');
  });
  afterAll(() => session.stop());

  // A result's custom inspect, or a getter, Proxy trap or toString of what was thrown, is the
  // session's code too: interrupted at the call's timeout like the cell, not left to the watchdog,
  // which gives the kernel (and the session's state) up.
  it.each([
    ['a looping custom inspect', "({ [Symbol.for('nodejs.util.inspect.custom')]() { while (true) {} } })"],
    ['a looping custom inspect after an await', "await null;\n({ [Symbol.for('nodejs.util.inspect.custom')]() { while (true) {} } })"],
    ['a thrown value whose stack getter loops', 'throw { get stack() { while (true) {} } }'],
    ['a thrown Proxy whose getPrototypeOf trap loops', 'throw new Proxy({}, { getPrototypeOf() { while (true) {} } })'],
    [
      'a thrown error whose message converts forever',
      "const e1 = new Error('x'); Object.defineProperty(e1, 'message', { get: () => ({ toString() { while (true) {} } }) }); throw e1",
    ],
  ])(
    'interrupts %s at the timeout and keeps the session',
    async (_name, code) => {
      const { client } = session;
      await client.exec('kept = 7');
      expect((await client.exec(code, { timeoutMs: 300 })).frame).toMatchObject({ status: 'timeout', error: { ename: 'Timeout' } });
      expect((await client.exec('kept')).frame).toMatchObject({ status: 'ok', result: '7' });
    },
    20_000,
  );
});

describe('node kernel whose code removed its listeners', () => {
  // process.removeAllListeners() takes the kernel's uncaught-error listeners too: the next error a
  // timer throws would end the kernel (and the session's state) instead of going to stderr.
  it('puts them back before the next call', async () => {
    const { client, kernel, stop } = await startSession('node');
    try {
      expect((await client.exec('kept = 7; process.removeAllListeners(); 1')).frame).toMatchObject({ status: 'ok', result: '1' });
      const late = "setTimeout(() => { throw new Error('late') }, 10); await new Promise((r) => setTimeout(r, 100)); kept";
      expect((await client.exec(late)).frame).toMatchObject({ status: 'ok', result: '7', stderr: expect.stringContaining('Uncaught Error: late') });
      expect(kernel.proc.exitCode).toBeNull();
    } finally {
      await stop();
    }
  });
});

describe('node kernel compiling a large cell', () => {
  // The let/const rewrite happens before vm's timeout starts: it must stay linear in the code
  // (splicing per declaration took 10 s for this cell, and the watchdog gave the kernel up).
  it('runs a cell of 20,000 top-level declarations well within its timeout', async () => {
    const { client, stop } = await startSession('node');
    try {
      const lines = Array.from({ length: 20_000 }, (_, i) => (i % 2 ? `let a${i} = ${i}` : `const a${i} = ${i}`));
      const { frame } = await client.exec(`${lines.join('\n')}\na1 + a19999`, { timeoutMs: 2000 });
      expect(frame).toMatchObject({ status: 'ok', result: '20000' });
      expect((await client.exec('const a1 = 5; a1')).frame).toMatchObject({ status: 'ok', result: '5' });
    } finally {
      await stop();
    }
  }, 20_000);
});

describe('node kernel that cannot interrupt a call', () => {
  it('replies lost and exits when a loop runs after an await', async () => {
    const { kernel, client, stop } = await startSession('node');
    try {
      const { frame } = await client.exec('await null\nwhile (true) {}', { timeoutMs: 200 });
      expect(frame).toMatchObject({ status: 'lost', error: { ename: 'KernelLost' } });
      await kernel.exited;
    } finally {
      await stop();
    }
  }, 20_000);
});
