// Adds up vitest JSON reports into the one closing line CI reads: "N passed, N failed, N skipped".
// A test file that failed to load (no test ran) counts as one failure. FAILED_PHASES names the
// phases of test/run-all.sh that exited non-zero (a report's name is its phase's); one whose report
// counts no failure (vitest's unhandled errors, go test, the deploy/ check) counts as one failure
// itself, so a red run never ends in "0 failed".
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';

let passed = 0;
let failed = 0;
let skipped = 0;
const failedIn = new Map();
for (const file of process.argv.slice(2)) {
  const r = JSON.parse(readFileSync(file, 'utf8'));
  let fileFailed = r.numFailedTests;
  for (const suite of r.testResults ?? []) {
    if (suite.status === 'failed' && (suite.assertionResults ?? []).every((a) => a.status !== 'failed')) fileFailed += 1;
  }
  passed += r.numPassedTests;
  failed += fileFailed;
  skipped += r.numPendingTests + (r.numTodoTests ?? 0);
  failedIn.set(basename(file, '.json'), fileFailed);
}
for (const phase of (process.env.FAILED_PHASES ?? '').split(' ').filter(Boolean)) {
  if ((failedIn.get(phase) ?? 0) > 0) continue;
  failed += 1;
  console.log(`\nPhase ${phase} exited non-zero with no failed test in its report: see its output above (vitest lists unhandled errors under "Errors").`);
}
console.log(`\n${passed} passed, ${failed} failed, ${skipped} skipped`);
