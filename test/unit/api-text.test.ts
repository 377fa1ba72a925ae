// Free-text fields are bounded in characters, as the API server counts a CRD's maxLength (zod's
// .max counts code points, as of 4.6): a value of astral characters (two UTF-16 units each) at the
// bound is accepted here as it is there, so an object the API server stored is never refused when read.
// And a status message that quotes the sandbox is one line within its bound (boundMessages).
import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { ConditionSchema, MAX_CONDITION_MESSAGE, boundMessages, sentence } from '../../src/api/v1alpha1/conditions.js';
import { buildSandboxProfileCrd, buildSandboxRunCrd, buildSandboxSessionCrd, buildUpstreamServerCrd } from '../../src/api/v1alpha1/index.js';
import { OwnerSchema } from '../../src/api/v1alpha1/owner.js';
import { SandboxProfileSpecSchema } from '../../src/api/v1alpha1/sandboxprofile.js';
import { SandboxRunStatusSchema } from '../../src/api/v1alpha1/sandboxrun.js';
import { SandboxSessionStatusSchema } from '../../src/api/v1alpha1/sandboxsession.js';
import { fitStatus } from '../../src/api/v1alpha1/storage.js';
import { UpstreamServerStatusSchema } from '../../src/api/v1alpha1/upstreamserver.js';
import { StdioServerSchema } from '../../src/api/v1alpha1/upstreamserver-stdio.js';

const EMOJI = '\u{1F600}';
type Crd = ReturnType<typeof buildSandboxRunCrd>;

/** The CRD schema node at `path` (property names; `[]` steps into array items). */
function crdNode(crd: Crd, path: string[]): Record<string, unknown> {
  let node = crd.spec.versions[0]!.schema!.openAPIV3Schema as Record<string, unknown>;
  for (const step of path) {
    node = (step === '[]' ? node.items : (node.properties as Record<string, unknown>)[step]) as Record<string, unknown>;
    if (node === undefined) throw new Error(`no ${path.join('.')} in ${crd.metadata?.name}`);
  }
  return node;
}

const stdio = (value: string): unknown => ({ image: 'node:22-slim', command: ['npx'], env: [{ name: 'A', value }] });
const condition = (message: string): unknown => ({ type: 'Ready', status: 'True', reason: 'Ok', message, lastTransitionTime: '2026-12-05T00:00:00Z' });

describe('free text is bounded in characters, as the CRD counts it', () => {
  it.each<[string, z.ZodType, (text: string) => unknown, Crd, string[], number]>([
    [
      'SandboxProfile description',
      SandboxProfileSpecSchema,
      (t) => ({ image: 'python:3', description: t }),
      buildSandboxProfileCrd(),
      ['spec', 'description'],
      512,
    ],
    ['owner user', OwnerSchema, (t) => ({ user: t }), buildSandboxRunCrd(), ['spec', 'owner', 'user'], 256],
    ['owner group', OwnerSchema, (t) => ({ user: 'a', groups: [t] }), buildSandboxSessionCrd(), ['spec', 'owner', 'groups', '[]'], 256],
    ['SandboxRun status message', SandboxRunStatusSchema, (t) => ({ message: t }), buildSandboxRunCrd(), ['status', 'message'], 32768],
    ['SandboxRun status reason', SandboxRunStatusSchema, (t) => ({ reason: t }), buildSandboxRunCrd(), ['status', 'reason'], 1024],
    [
      'SandboxSession kernelLost message',
      SandboxSessionStatusSchema,
      (t) => ({ kernelLost: { message: t, time: '2026-12-05T00:00:00Z' } }),
      buildSandboxSessionCrd(),
      ['status', 'kernelLost', 'message'],
      1024,
    ],
    ['a condition message', ConditionSchema, condition, buildSandboxRunCrd(), ['status', 'conditions', '[]', 'message'], 32768],
    ['UpstreamServer lastError', UpstreamServerStatusSchema, (t) => ({ lastError: t }), buildUpstreamServerCrd(), ['status', 'lastError'], 1024],
    ['a stdio server env value', StdioServerSchema, stdio, buildUpstreamServerCrd(), ['spec', 'stdio', 'env', '[]', 'value'], 32768],
  ])('%s', (_name, schema, wrap, crd, path, max) => {
    expect(crdNode(crd, path).maxLength).toBe(max);
    expect(schema.safeParse(wrap(EMOJI.repeat(max))).success).toBe(true);
    const over = schema.safeParse(wrap(EMOJI.repeat(max + 1)));
    expect(over.success).toBe(false);
    expect(over.error?.issues.map((i) => i.code)).toContain('too_big');
    expect(schema.safeParse(wrap('a'.repeat(max + 1))).success).toBe(false);
  });
});

describe('boundMessages: what a status message quotes is one line, within the bound', () => {
  const forged = 'ValueError: x\r\n\n  Reason:       Succeeded\n  Message:      fine\u001b[2K\u001b]0;pwned\u0007';
  const cond = { type: 'Complete', status: 'True' as const, reason: 'Exception', lastTransitionTime: '2026-12-05T00:00:00Z' };
  it.each<[string, string, string]>([
    ['plain text stays', 'The code ran to completion.', 'The code ran to completion.'],
    ['line breaks and escape sequences become spaces', forged, forged.replace(/[\u0000-\u001f\u007f-\u009f]/g, ' ')],
    ['C1 controls too', 'a\u0085b\u009bc', 'a b c'],
    ['over the bound: cut', 'x'.repeat(MAX_CONDITION_MESSAGE + 10), `${'x'.repeat(MAX_CONDITION_MESSAGE - 1)}…`],
  ])('%s', (_name, message, want) => {
    const out = boundMessages({ message, conditions: [{ ...cond, message }] });
    expect(out.message).toBe(want);
    expect(out.conditions?.[0]?.message).toBe(want);
    expect(out.message).not.toMatch(/[\n\r\u001b]/);
  });

  it('returns the same object when nothing needs changing', () => {
    const s = { message: 'fine', conditions: [{ ...cond, message: 'also fine' }] };
    expect(boundMessages(s)).toBe(s);
  });

  it('is what a stored SandboxRun status gets: an exception message from the sandbox', () => {
    const run = { metadata: { name: 'r', namespace: 'n' }, spec: { code: 'x', language: 'python' as const, timeoutSeconds: 30 } };
    const status = fitStatus(run as never, { phase: 'Failed', reason: 'Exception', message: forged, conditions: [{ ...cond, message: forged }] });
    expect(status.message).not.toMatch(/[\n\r\u001b\u0007]/);
    expect(status.conditions?.[0]?.message).not.toMatch(/[\n\r\u001b\u0007]/);
  });
});

describe('sentence', () => {
  it.each<[string, string]>([
    ['The pod is gone', 'The pod is gone.'],
    ['The pod is gone.', 'The pod is gone.'],
    ['Is it there?', 'Is it there?'],
    ['Stop!', 'Stop!'],
    ['ask about networkpolicies.', 'ask about networkpolicies.'],
    ['', '.'],
  ])('%j → %j', (text, expected) => {
    expect(sentence(text)).toBe(expected);
  });
});
