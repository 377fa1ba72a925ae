// Audit entries for the writer's and queue's tests: a finished call, named and owned as asked.
import { auditEntry, type AuditEntry } from '../../../src/audit/record.js';

/** A finished session call `name` of `user`'s `session` in namespace n (the queue reads only those). */
export const finishedCall = (user: string, session: string, name: string): AuditEntry =>
  auditEntry({
    name,
    namespace: 'n',
    session,
    owner: { user },
    language: 'python',
    timeoutSeconds: 30,
    code: 'secret = 1',
    startedMs: 0,
    endedMs: 1,
    outcome: { phase: 'Succeeded', truncated: false, stdoutBytes: 0, stderrBytes: 0 },
  });
