// The administrator's limits on what one run may ask for, checked in one place for every way a run
// arrives: an execute_code call (before anything is created) and a SandboxRun created with kubectl
// (the CRD schema knows only the hard maxima, not this installation's configuration).
import { DEFAULT_RUN_TIMEOUT_SECONDS, MIN_MEMORY, MIN_MEMORY_BYTES, MIN_MEMORY_HINT } from '../api/v1alpha1/index.js';
import type { Config } from '../config/index.js';
import { parseQuantity } from '../config/quantity.js';

export type SpecLimits = Pick<Config, 'maxTimeoutSeconds' | 'maxCodeBytes' | 'maxCpu' | 'maxMemory'>;

export interface LimitRequest {
  timeoutSeconds: number;
  code: string;
  resources?: { cpu?: string; memory?: string };
}

/** One limit a request is over: the field (as a SandboxRun names it), what is wrong, what to do. */
export interface LimitProblem {
  field: 'spec.timeoutSeconds' | 'spec.code' | 'spec.resources.cpu' | 'spec.resources.memory';
  problem: string;
  hint: string;
}

/**
 * `specDefaults`: the request is a SandboxRun's spec, whose omitted fields the CRD filled in: a
 * timeout at its default may be one the user never wrote, and the message says so.
 */
export function limitProblems(req: LimitRequest, limits: SpecLimits, specDefaults = false): LimitProblem[] {
  const problems: LimitProblem[] = [];
  if (req.timeoutSeconds > limits.maxTimeoutSeconds) {
    const defaulted =
      specDefaults && req.timeoutSeconds === DEFAULT_RUN_TIMEOUT_SECONDS ? ` (${DEFAULT_RUN_TIMEOUT_SECONDS} is its default when left out)` : '';
    problems.push({
      field: 'spec.timeoutSeconds',
      problem: `timeout ${req.timeoutSeconds}s${defaulted} is above the maximum of ${limits.maxTimeoutSeconds}s`,
      hint: `use a timeout of at most ${limits.maxTimeoutSeconds} seconds, or split the work into shorter runs`,
    });
  }
  const bytes = Buffer.byteLength(req.code, 'utf8');
  if (bytes > limits.maxCodeBytes) {
    problems.push({
      field: 'spec.code',
      problem: `the code is ${bytes} bytes, above the maximum of ${limits.maxCodeBytes}`,
      hint: 'send smaller code: split the work into several calls or generate data inside the sandbox',
    });
  }
  const { cpu, memory } = req.resources ?? {};
  if (cpu && parseQuantity(cpu) > parseQuantity(limits.maxCpu)) {
    problems.push({ field: 'spec.resources.cpu', problem: `cpu ${cpu} is above the maximum of ${limits.maxCpu}`, hint: `ask for at most ${limits.maxCpu}` });
  }
  if (memory && parseQuantity(memory) < MIN_MEMORY_BYTES) {
    problems.push({ field: 'spec.resources.memory', problem: `memory ${memory} is below the minimum of ${MIN_MEMORY}`, hint: `ask for ${MIN_MEMORY_HINT}` });
  }
  if (memory && parseQuantity(memory) > parseQuantity(limits.maxMemory)) {
    problems.push({
      field: 'spec.resources.memory',
      problem: `memory ${memory} is above the maximum of ${limits.maxMemory}`,
      hint: `ask for at most ${limits.maxMemory}`,
    });
  }
  return problems;
}

/** The problems as one sentence for a SandboxRun's status: `Invalid SandboxRun: spec.code: …; …`. */
export function invalidSpecMessage(problems: readonly LimitProblem[]): string | undefined {
  if (problems.length === 0) return undefined;
  return `Invalid SandboxRun: ${problems.map((p) => `${p.field}: ${p.problem}; ${p.hint}`).join('; ')}.`;
}
