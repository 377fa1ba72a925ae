// Structured JSON logs (pino). Never log submitted code, stdin, file contents or program output:
// callers pass names, phases and reasons only.
import { pino, type Logger } from 'pino';

export function createLogger(level: string): Logger {
  return pino({
    level,
    base: { component: 'codemode-operator' },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
  });
}
