// Nested tool calls from sandbox code (issue 11, "Policy, limits, audit"). Labels from closed
// sets: `server` is an upstream's admin-defined name ("" when the program named one it may not
// use), `outcome` one of CALL_OUTCOMES — never a tool's arguments, a user or a session.
import { Counter, Histogram, type Registry } from 'prom-client';
import { CALL_OUTCOMES, type CodemodeMetrics } from '../codemode/broker.js';

const CALL_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

export function codemodeMetrics(registry: Registry): CodemodeMetrics {
  const calls = new Counter({
    name: 'codemode_upstream_calls_total',
    help: `Tool calls sandbox code made through the broker, by upstream server ("" when it named a server it may not use) and outcome (${CALL_OUTCOMES.join(', ')}).`,
    labelNames: ['server', 'outcome'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'codemode_upstream_call_duration_seconds',
    help: 'Time from a nested tool call reaching the gateway to its answer (upstream wait included), by upstream server and outcome.',
    labelNames: ['server', 'outcome'] as const,
    buckets: CALL_BUCKETS,
    registers: [registry],
  });
  return {
    upstreamCall(server, outcome, seconds): void {
      calls.inc({ server, outcome });
      duration.observe({ server, outcome }, seconds);
    },
  };
}
